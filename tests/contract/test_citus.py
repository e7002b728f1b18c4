"""The scale-out path on a real Citus cluster (issue 30; docs/scale-out.md): what
``quipu migrate --citus`` distributes, and that one tenant's recall, write and list each run as a
single task on the worker that holds the tenant. The rest of the store contract runs on Citus
through the ``citus`` backend of every contract test; growth (adding a node, rebalancing under
writes, isolating a tenant) is in test_citus_growth.py."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from pgvector.psycopg import register_vector

from quipu.core.limits import Limits
from quipu.core.records import Principal
from quipu.memories import MemoryService
from quipu.storage.postgres.migrate import DISTRIBUTED, REFERENCE
from quipu.storage.postgres.store import PostgresStore
from tests.conftest import CITUS_URL
from tests.support.pg import CitusSchemas, drop_schema, new_schema, quipu_migrate_citus, schema_url

pytestmark = [
    pytest.mark.citus,
    pytest.mark.skipif(CITUS_URL is None, reason="needs QUIPU_TEST_CITUS_URL (make test sets it)"),
]

#: Tables that stay plain tables on the coordinator (docs/scale-out.md, "What goes where").
LOCAL = ("schema_migrations", "jobs", "rate_buckets")


def test_scale_out_migrate_citus_distributes_every_tenant_table_colocated() -> None:
    """``quipu migrate --citus`` on an empty schema: every table with tenant rows is hash
    distributed by tenant_id in ONE co-location group (a tenant's rows of every table sit in
    one shard group, so a statement joining them stays on one worker); the tables looked up
    before the tenant is known are reference tables; the queue and the rate buckets stay on the
    coordinator. Running it again changes nothing."""
    assert CITUS_URL is not None
    name = new_schema(CITUS_URL, f"m_{uuid.uuid4().hex[:12]}")
    url = schema_url(CITUS_URL, name)
    try:
        report = quipu_migrate_citus(url)
        assert sorted(report["distributed"]) == sorted(DISTRIBUTED + REFERENCE)
        assert report["applied"] and report["backend"] == "postgres"
        with psycopg.connect(url) as conn:
            tables = {
                str(r[0])
                for r in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                )
            }
            layout = {
                str(r[0]).rsplit(".", 1)[-1]: (str(r[1]), r[2], int(r[3]))
                for r in conn.execute(
                    "SELECT logicalrelid::regclass::text, partmethod,"
                    " column_to_column_name(logicalrelid, partkey), colocationid"
                    " FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid"
                    " WHERE c.relnamespace = current_schema()::regnamespace"
                ).fetchall()
            }
            with_tenant = {
                str(r[0])
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.columns"
                    " WHERE table_schema = current_schema() AND column_name = 'tenant_id'"
                )
            }
        assert tables == set(DISTRIBUTED) | set(REFERENCE) | set(LOCAL)
        groups = {layout[t][2] for t in DISTRIBUTED}
        assert len(groups) == 1, layout
        assert all(layout[t][:2] == ("h", "tenant_id") for t in DISTRIBUTED), layout
        assert all(layout[t][0] == "n" for t in REFERENCE), layout
        assert not set(LOCAL) & layout.keys()
        # every table holding tenant rows is distributed, except the three named and why:
        # tenant_keys / tenants / credentials are read by key before the tenant is known, jobs
        # is claimed across tenants (FOR UPDATE SKIP LOCKED) — docs/scale-out.md
        assert with_tenant - set(DISTRIBUTED) == {"tenant_keys", "tenants", "credentials", "jobs"}
        again = quipu_migrate_citus(url)
        assert again["applied"] == [] and again["distributed"] == []
    finally:
        drop_schema(CITUS_URL, name)


# -- routing: one tenant, one worker, one task per statement --------------------------------


@contextmanager
def captured() -> Iterator[list[tuple[str, Any]]]:
    """Every statement a psycopg cursor runs meanwhile, with its parameters."""
    sent: list[tuple[str, Any]] = []
    execute = psycopg.Cursor.execute

    def spy(cur: psycopg.Cursor[Any], query: Any, params: Any = None, **kw: Any) -> Any:
        text = query if isinstance(query, str) else query.as_string(cur.connection)
        sent.append((text, params))
        return execute(cur, query, params, **kw)

    psycopg.Cursor.execute = spy  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]


_NODE = re.compile(r"Node: host=\S+ port=(\d+)")


def explain_all(url: str, statements: list[tuple[str, Any]]) -> list[tuple[str, list[str]]]:
    """``EXPLAIN`` of each statement that reads or writes a table (not BEGIN, SET LOCAL, ...)."""
    out = []
    with psycopg.connect(url, autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
        register_vector(conn)
        for text, params in statements:
            if not re.match(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b", text, re.I):
                continue
            # values bound as literals: the plan Citus makes for the statement it was sent
            plan = [str(r[0]) for r in conn.execute("EXPLAIN " + text, params).fetchall()]
            out.append((text, plan))
    return out


def assert_one_task_on(worker: int, plans: list[tuple[str, list[str]]]) -> int:
    """Every statement on a distributed table is one task, on ``worker``, with no subplan and
    no rows pulled through the coordinator; returns how many statements were distributed."""
    distributed = 0
    for text, plan in plans:
        whole = "\n".join(plan)
        if "Citus" not in whole:
            assert "memory_versions" not in text and "scope_state" not in text, (text, whole)
            continue  # the coordinator's own: the key sequences, a reference table read
        if not re.search(r"\b(memory_versions|memory_aliases|scope_state|scope_terms|audit_log)\b",
                         text):  # fmt: skip
            continue  # a reference table (store_meta): one task on a node holding a copy
        distributed += 1
        counts = [int(n) for n in re.findall(r"Task Count: (\d+)", whole)]
        assert counts == [1], (text, whole)
        assert "Subplan" not in whole and "pull to coordinator" not in whole, (text, whole)
        assert "repartition" not in whole.lower() and "broadcast" not in whole.lower()
        assert {int(p) for p in _NODE.findall(whole)} == {worker}, (text, whole)
    return distributed


def _tenant_worker(url: str, tenant: str) -> int:
    """The port of the worker holding ``tenant``'s shard group in this URL's schema. Only this
    schema's tables are named to a function: ``citus_shards`` (and a filter the planner may
    apply after the function) resolves every shard of the cluster, and fails with "relation
    with OID … does not exist" when another test drops its schema meanwhile (the clean-clone
    `make test` failure of test_citus_growth.py: the other pytest worker's session ended)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "WITH mine AS MATERIALIZED (SELECT p.logicalrelid FROM pg_dist_partition p"
            "  JOIN pg_class c ON c.oid = p.logicalrelid"
            "  WHERE p.partmethod = 'h' AND c.relnamespace = current_schema()::regnamespace),"
            " shard AS MATERIALIZED (SELECT"
            "  get_shard_id_for_distribution_column(logicalrelid, %s::text) AS shardid FROM mine)"
            " SELECT DISTINCT n.nodeport FROM shard s"
            " JOIN pg_dist_placement pl ON pl.shardid = s.shardid AND pl.shardstate = 1"
            " JOIN pg_dist_node n ON n.groupid = pl.groupid",
            (tenant,),
        ).fetchall()
    assert len(rows) == 1, rows  # the tenant's shards of every table: one shard group
    return int(rows[0][0])


@pytest.fixture
def citus_service(
    citus_schemas: CitusSchemas, local_embedder: Any
) -> Iterator[tuple[str, MemoryService]]:
    url = citus_schemas.take()
    svc = MemoryService(PostgresStore(url), local_embedder, Limits())
    yield url, svc
    svc.store.close()
    citus_schemas.give_back(url)


def test_scale_out_one_tenants_recall_write_and_list_each_run_on_one_worker(
    citus_service: tuple[str, MemoryService], alice: Principal, other_tenant: Principal
) -> None:
    """SCOPE-1 at scale: for one tenant, the statements of a write (remember, revise), a recall
    and a list are each planned by Citus as a single task on the worker holding the tenant's
    shard group: no broadcast to every shard, no subplan, no rows through the coordinator
    (asserted on ``EXPLAIN`` of the exact statements the store sent, with their values)."""
    url, svc = citus_service
    first = svc.remember(alice, "Dana prefers window seats on long flights")
    svc.remember(other_tenant, "another tenant's note about window seats")
    worker = _tenant_worker(url, alice.tenant_id)

    actions: dict[str, Callable[[], object]] = {
        "remember": lambda: svc.remember(alice, "Dana booked a trip to Lisbon in May"),
        "revise": lambda: svc.revise(alice, first.memory.id, text="Dana prefers aisle seats"),
        "recall": lambda: svc.recall(alice, "where does Dana like to sit?"),
        "list": lambda: svc.list(alice),
    }
    counted = {}
    for name, action in actions.items():
        with captured() as sent:
            action()
        counted[name] = assert_one_task_on(worker, explain_all(url, sent))
    # each action did reach the tenant's tables (the assertions above were not vacuous)
    assert counted["remember"] >= 5 and counted["revise"] >= 5, counted
    assert counted["recall"] >= 2 and counted["list"] >= 1, counted
