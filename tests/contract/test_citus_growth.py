"""Growing a Citus cluster under load (issue 30; docs/scale-out.md, "Adding a node"): a third
worker joins, the rebalancer moves shard groups onto it while writes and recalls go on, and
afterwards every acknowledged write is there and every recall answers exactly as before. Then
one large tenant is isolated onto a shard of its own, moved to the new node, and keeps working.

The procedure is the operator's, step for step: ``quipu migrate --citus`` (with 8 shards per
table rather than Citus's default 32: each shard group moved costs ~7 s of logical replication
set-up here, and 8 still puts every tenant's shard group among several), start the node, ``citus_add_node``, ``citus_rebalance_start`` and
``citus_rebalance_wait``, ``isolate_tenant_to_new_shard(..., 'CASCADE')``,
``citus_move_shard_placement``. The new node is started like the others
(the shared citus-cluster.sh) in the cluster's directory and listed in its ``ports`` file, so
scripts/with-citus.sh stops it with the rest.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.evals.perf import _PEOPLE, _THINGS, imported_fact, sentence
from quipu.memories import MemoryService
from quipu.storage.postgres.store import PostgresStore
from tests.conftest import CITUS_URL
from tests.contract.test_citus import _tenant_worker, assert_one_task_on, captured, explain_all
from tests.support.pg import citus_schema, drop_schema

CITUS_DIR = os.environ.get("QUIPU_TEST_CITUS_DIR") or None
PGBIN = Path("/usr/lib/postgresql/15/bin")

pytestmark = [
    pytest.mark.citus,
    pytest.mark.slow,
    pytest.mark.skipif(CITUS_URL is None, reason="needs QUIPU_TEST_CITUS_URL (make test sets it)"),
    pytest.mark.skipif(
        CITUS_URL is not None and CITUS_DIR is None,
        reason="adding a node needs the cluster's directory, QUIPU_TEST_CITUS_DIR "
        "(scripts/with-citus.sh sets it; a cluster of your own is not grown by the tests)",
    ),
]

STATIC = [f"g-{i:02d}" for i in range(20)]  # asked the same questions before and after
WRITTEN = [f"w-{i:02d}" for i in range(24)]  # written to while the shards move
BIG = "g-big"  # isolated onto its own shard at the end


def _who(tenant: str) -> Principal:
    return Principal(tenant, f"key-{tenant}", Role.AGENT, agent_id="agent", user_id="user")


def _run(*cmd: str | Path) -> str:
    done = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, (cmd, done.stdout, done.stderr)
    return done.stdout


def start_worker(cluster: Path) -> int:
    """One more worker node, configured as citus-cluster.sh configures its nodes plus the
    lines scripts/with-citus.sh added to every node (DIR/node.conf: wal_level = logical, ...);
    returns its port."""
    ports = cluster / "ports"
    taken = {line.split()[0] for line in ports.read_text().splitlines() if line.strip()}
    name = next(f"w{n}" for n in range(3, 100) if f"w{n}" not in taken)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with ports.open("a") as fh:  # listed first: stopped by with-citus.sh whatever happens next
        fh.write(f"{name} {port}\n")
    data = cluster / name
    _run("runuser", "-u", "postgres", "--", PGBIN / "initdb", "-D", data, "-A", "trust",
         "-U", "postgres")  # fmt: skip
    with (data / "postgresql.conf").open("a") as conf:
        conf.write(
            f"shared_preload_libraries = 'citus'\nlisten_addresses = '127.0.0.1'\nport = {port}\n"
            f"unix_socket_directories = '{cluster}'\nfsync = off\n"
            + (cluster / "node.conf").read_text()
        )
    _run("runuser", "-u", "postgres", "--", PGBIN / "pg_ctl", "-D", data, "-l",
         cluster / f"{name}.log", "-w", "start")  # fmt: skip
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", autocommit=True) as c:
        c.execute("CREATE EXTENSION citus")
        c.execute("CREATE EXTENSION vector")
    return port


def _load(svc: MemoryService, embedder: Any) -> dict[str, list[str]]:
    """Memories for every static tenant (15 each, 400 for the big one), imported with real
    embeddings; returns each tenant's questions."""
    rng = random.Random(30)
    now = datetime.now(UTC)
    questions = {}
    for tenant in [*STATIC, BIG]:
        n = 400 if tenant == BIG else 15
        texts = [sentence(rng) for _ in range(n)]
        vectors = embedder.embed_batch(texts)
        pin = svc.store.embedding_pin()
        assert pin is not None
        rows = [
            (imported_fact(tenant, "agent", t, at=now - timedelta(seconds=n - i), model=pin.model_id),
             v)
            for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
        ]  # fmt: skip
        assert svc.import_(_who(tenant), rows) == n
        questions[tenant] = [
            f"what does {rng.choice(_PEOPLE)} think about {rng.choice(_THINGS)}?" for _ in range(2)
        ]
    return questions


def _answers(svc: MemoryService, questions: dict[str, list[str]]) -> dict[tuple[str, str], Any]:
    return {
        (tenant, q): [(h.memory.id, h.memory.version, round(h.score, 9)) for h in
                      svc.recall(_who(tenant), q, k=10).results]
        for tenant, qs in questions.items()
        for q in qs
    }  # fmt: skip


def _listed(svc: MemoryService, who: Principal) -> list[str]:
    """Every live memory id of the principal's agent scope, page by page."""
    ids: list[str] = []
    cursor = None
    while True:
        page = svc.list(who, cursor=cursor, limit=200)
        ids += [m.id for m in page.items]
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


def _nodes(url: str, tenants: list[str]) -> dict[str, int]:
    return {t: _tenant_worker(url, t) for t in tenants}


def test_scale_out_add_a_node_rebalance_under_writes_then_isolate_a_tenant(
    local_embedder: Any,
) -> None:
    assert CITUS_URL is not None and CITUS_DIR is not None
    name = f"grow_{uuid.uuid4().hex[:8]}"
    url = citus_schema(CITUS_URL, name, shards=8)
    svc = MemoryService(PostgresStore(url), local_embedder, Limits())
    try:
        _grow(url, svc, local_embedder)
    finally:
        svc.store.close()
        drop_schema(CITUS_URL, name)


def _grow(url: str, svc: MemoryService, embedder: Any) -> None:
    svc.remember(_who(STATIC[0]), "pins the embedding model before the import")
    questions = _load(svc, embedder)
    before = _answers(svc, questions)
    placed = _nodes(url, [*STATIC, *WRITTEN, BIG])

    new_port = start_worker(Path(str(CITUS_DIR)))
    with psycopg.connect(CITUS_URL, autocommit=True) as admin:
        admin.execute("SELECT citus_add_node('127.0.0.1', %s)", (new_port,))

    acked: list[tuple[str, str]] = []
    failures: list[BaseException] = []
    mid_answers: list[bool] = []
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            tenant = WRITTEN[n % len(WRITTEN)]
            try:
                result = svc.remember(_who(tenant), f"written during the move, number {n}")
                acked.append((tenant, result.memory.id))
            except Exception as exc:  # every failure is asserted on below
                failures.append(exc)
            n += 1

    def read() -> None:
        keys = list(before)
        n = 0
        while not stop.is_set():
            tenant, q = keys[n % len(keys)]
            try:
                got = [(h.memory.id, h.memory.version, round(h.score, 9))
                       for h in svc.recall(_who(tenant), q, k=10).results]  # fmt: skip
                mid_answers.append(got == before[(tenant, q)])
            except Exception as exc:
                failures.append(exc)
            n += 1

    threads = [threading.Thread(target=write), threading.Thread(target=read)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)  # writes are flowing before the first shard moves
        with psycopg.connect(CITUS_URL, autocommit=True) as admin:
            admin.execute("SELECT citus_rebalance_start()")
            admin.execute("SELECT citus_rebalance_wait()")
            status = admin.execute(
                "SELECT state FROM citus_rebalance_status() ORDER BY job_id DESC LIMIT 1"
            ).fetchone()
        time.sleep(1.0)  # and still flowing after the last one
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert status is not None and status[0] == "finished", status
    assert not failures, failures[:3]
    assert len(acked) > 50 and mid_answers and all(mid_answers), (len(acked), mid_answers)

    # shard groups did move onto the new node, among them tenants written to and asked
    moved = {t for t, port in _nodes(url, [*STATIC, *WRITTEN, BIG]).items() if port != placed[t]}
    assert moved and {_tenant_worker(url, t) for t in moved} == {new_port}, moved
    assert moved & set(WRITTEN) and moved & set(STATIC), moved

    # every acknowledged write is there, once; recall answers are the same, question by question
    for tenant in WRITTEN:
        mine = {i for t, i in acked if t == tenant}
        listed = _listed(svc, _who(tenant))
        assert len(listed) == len(mine) and set(listed) == mine, tenant
    assert _answers(svc, questions) == before

    # isolate the big tenant onto a shard of its own, then give it the new node
    with psycopg.connect(url, autocommit=True) as conn:
        shard = conn.execute(
            "SELECT isolate_tenant_to_new_shard('memory_versions', %s::text, 'CASCADE')", (BIG,)
        ).fetchone()[0]  # type: ignore[index]
        low, high = conn.execute(
            "SELECT shardminvalue, shardmaxvalue FROM pg_dist_shard WHERE shardid = %s", (shard,)
        ).fetchone()  # type: ignore[misc]
        assert low == high  # one hash value: this tenant's alone
        source = _tenant_worker(url, BIG)
        if source != new_port:
            conn.execute(
                "SELECT citus_move_shard_placement(%s, '127.0.0.1', %s, '127.0.0.1', %s)",
                (shard, source, new_port),
            )
    assert _tenant_worker(url, BIG) == new_port
    assert _answers(svc, {BIG: questions[BIG]}) == {k: v for k, v in before.items() if k[0] == BIG}
    big = _who(BIG)
    added = svc.remember(big, "the big tenant still takes writes on its own shard")
    assert svc.get(big, added.memory.id).text == added.memory.text
    assert len(_listed(svc, big)) == 401
    with captured() as sent:
        svc.recall(big, questions[BIG][0])
        svc.remember(big, "and another after the move")
    assert assert_one_task_on(new_port, explain_all(url, sent)) >= 5
    # the tenants left on the split shard's other parts are unaffected
    assert _answers(svc, {STATIC[1]: questions[STATIC[1]]}) == {
        k: v for k, v in before.items() if k[0] == STATIC[1]
    }
