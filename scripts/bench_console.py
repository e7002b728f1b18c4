#!/usr/bin/env python3
"""Console page load times for one subject holding 10,000 memories (issue 29), printed as JSON.

    python scripts/bench_console.py [--rows 10000] [--requests 200] [--database PATH|URL]

Builds a store (a SQLite file in a temporary folder by default, or a fresh schema of the
PostgreSQL at ``--database``) with tenant ``acme``, a superadmin key and ``--rows`` memories of
agent ``support-bot`` (imported with vectors of the bundled model's shape), starts a real
`quipu serve --auth` on it, signs in to the console over HTTP like a browser (CSRF cookie, form
post, session cookie) and times ``--requests`` sequential loads of each page: the subjects list,
the subject's first page, a memory's page (with its entities and facts), the review queue, the
audit log, jobs, health, the subject's entities (first page; a name-prefix filter, a POST), the
page of its busiest entity (now, and with invalidated facts), and a search (a POST); then, as
a tenant admin, the subjects list, the sessions list (50 sessions of 20 turns, plus one of 200
turns), that 200-turn session's page, the knowledge list (50 articles) and an article's page.
The subject's entity graph is every memory read by the extractor plus 2,000 people. Times are
whole requests measured by the client: server render plus loopback HTTP. Nothing is asserted;
the numbers are for docs/console.md.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.console_server import ConsoleServer, open_store  # noqa: E402

from quipu.auth.access import Access  # noqa: E402
from quipu.core.graph import Extraction, FactDraft, Mention, Ontology, Source  # noqa: E402
from quipu.core.records import Principal, Role, Scope, ScopeRef  # noqa: E402
from quipu.embeddings.local import LocalEmbedder  # noqa: E402
from quipu.evals.perf import machine, percentiles, synthetic_rows  # noqa: E402
from quipu.graph.service import GraphService  # noqa: E402
from quipu.knowledge import KnowledgeService  # noqa: E402
from quipu.memories import MemoryService  # noqa: E402
from quipu.sessions import SessionService  # noqa: E402

OWNER = "support-bot"
#: People added to the subject's graph beyond what its memories name.
GRAPH_PEOPLE = 2000


def seed(db: str, rows: int) -> dict[str, str]:
    """Tenant, keys and ``rows`` memories of one agent subject; returns the secrets."""
    store = open_store(db)
    try:
        access = Access(store)
        access.create_tenant("acme")
        _, superadmin = access.create_key("acme", "superadmin", name="bench")
        # An admin key bound to the subject's agent id: its agent scope is the 10,000 rows.
        _, admin = access.create_key("acme", "admin", name="bench", agent_id=OWNER)
        embedder = LocalEmbedder()
        service = MemoryService(store, embedder)  # pins the bundled model's id and dimension
        loader = Principal("acme", "bench", Role.ADMIN, surface="bench")

        class Shell:  # what synthetic_rows reads of an embedded client
            def __init__(self) -> None:
                self.service = service
                self.principal = loader

        made_rows = list(synthetic_rows(Shell(), rows, [OWNER], tenant_id="acme"))  # type: ignore[arg-type]
        batch: list[Any] = []
        for row in made_rows:
            batch.append(row)
            if len(batch) == 2000:
                service.import_(loader, iter(batch))
                batch = []
        if batch:
            service.import_(loader, iter(batch))
        seed_graph(store, service, [memory for memory, _ in made_rows])
        talker = Principal("acme", "bench-agent", Role.AGENT, agent_id=OWNER, user_id="u-17")
        sessions = SessionService(store)
        for n in range(50):
            for t in range(20):
                sessions.append(
                    talker, f"s-{n}", "user" if t % 2 == 0 else "assistant", f"turn {t}"
                )
        for t in range(200):
            sessions.append(talker, "s-long", "user" if t % 2 == 0 else "assistant", f"turn {t}")
        knowledge = KnowledgeService(service)
        for n in range(50):
            knowledge.create(loader, f"Policy {n}", f"Rule {n}: refunds within {n} days.")
        service.close()
        return {"superadmin": superadmin, "admin": admin}
    finally:
        store.close()


def seed_graph(store: Any, service: MemoryService, memories: list[Any]) -> None:
    """The subject's entity graph: every memory read by the extractor, as a write would, plus
    :data:`GRAPH_PEOPLE` people with random names, each named by one memory with one of 40
    workplaces (a fact), so the entities list has pages to turn."""
    graph = GraphService(service)
    for memory in memories:
        graph.observe(memory)
    ref = ScopeRef("acme", Scope.AGENT, OWNER)
    rng = random.Random(29)
    firms = [_word(rng) + " Ltd" for _ in range(40)]
    for n in range(min(GRAPH_PEOPLE, len(memories))):
        memory = memories[n]
        source = Source(memory.id, 1, memory.valid_at, None, "bench", None)
        # random names: resolution folds near spellings together, so no shared stem
        person = f"{_word(rng)} {_word(rng)}"
        store.graph_write(
            ref,
            Extraction(
                (Mention(person, "person"), Mention(firms[n % 40], "organisation")),
                (FactDraft(0, "works_at", 1),),
            ),
            source,
            datetime.now(UTC),
            Ontology(),
        )


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("bcdfghjklmnprstvz") + rng.choice("aeiou") for _ in range(3)).title()


def signed_in(url: str, secret: str, tenant: str | None = None) -> tuple[httpx.Client, str]:
    client = httpx.Client(base_url=url, timeout=60)
    form = client.get("/console/sign-in")
    token = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert token is not None
    done = client.post(
        "/console/sign-in",
        data={"csrf": token.group(1), "key": secret, **({"tenant": tenant} if tenant else {})},
    )
    assert done.status_code == 303, done.text
    page = client.get("/console/search")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    return client, csrf.group(1)


def timed(client: httpx.Client, requests: int, call: Any) -> dict[str, float]:
    call(client)  # warm
    spent = []
    for _ in range(requests):
        mark = time.perf_counter()
        answer = call(client)
        spent.append((time.perf_counter() - mark) * 1000)
        assert answer.status_code == 200, answer.text[:500]
    return {name: round(value, 2) for name, value in percentiles(spent).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--database", default=None, help="a SQLite path or a PostgreSQL URL")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="quipu-console-bench-"))
    schema = None
    db = args.database or str(work / "console.db")
    if db.startswith(("postgresql://", "postgres://")):
        from tests.support.pg import new_schema, schema_url

        schema = new_schema(db, f"console_bench_{uuid.uuid4().hex[:8]}")
        base_url, db = db, schema_url(db, schema)
    mark = time.perf_counter()
    keys = seed(db, args.rows)
    seeded = time.perf_counter() - mark
    from tests.support.console_server import serve

    server: ConsoleServer = serve(db, work, keys, wait=600)  # a loaded machine starts slowly
    try:
        client, _ = signed_in(server.url, keys["superadmin"], "acme")
        subject = client.get("/console/subject", params={"scope": "agent", "owner": OWNER})
        memory_id = re.search(r'/console/memories/([0-9a-f]{32})"', subject.text)
        assert memory_id is not None
        pages = {
            "subjects": lambda c: c.get("/console/subjects"),
            "subject_first_page": lambda c: c.get(
                "/console/subject", params={"scope": "agent", "owner": OWNER}
            ),
            "memory": lambda c: c.get(f"/console/memories/{memory_id.group(1)}"),
            "review_queue": lambda c: c.get("/console/review"),
            "audit": lambda c: c.get("/console/audit"),
            "jobs": lambda c: c.get("/console/jobs"),
            "health": lambda c: c.get("/console/health"),
        }
        entities = client.get("/console/entities", params={"scope": "agent", "owner": OWNER})
        assert entities.status_code == 200, entities.text[:500]
        # the busiest entity: the one with the most current facts on the first page
        counts = re.findall(
            r'/console/entities/([0-9a-f]{32})\?[^"]*">[^<]*</a></td>.*?<td class="num">(\d+)',
            entities.text,
            re.S,
        )
        assert counts, "the entities page lists nothing"
        hub = max(counts, key=lambda pair: int(pair[1]))[0]
        csrf = re.search(r'name="csrf" value="([^"]+)"', entities.text)
        assert csrf is not None
        where = {"scope": "agent", "owner": OWNER}
        pages.update(
            {
                "entities_first_page": lambda c: c.get("/console/entities", params=where),
                "entities_prefix_post": lambda c: c.post(
                    "/console/entities",
                    data={"csrf": csrf.group(1), **where, "prefix": "person0", "type": "person"},
                ),
                "entity_busiest": lambda c: c.get(f"/console/entities/{hub}", params=where),
                "entity_busiest_with_invalidated": lambda c: c.get(
                    f"/console/entities/{hub}", params={**where, "invalidated": "1"}
                ),
            }
        )
        order = list(pages)
        results = {name: timed(client, args.requests, pages[name]) for name in order}
        client.close()
        # Search as the admin key bound to the subject's agent: recall over its 10,000 rows.
        searcher, csrf = signed_in(server.url, keys["admin"])
        results["search_post"] = timed(
            searcher,
            args.requests,
            lambda c: c.post(
                "/console/search",
                data={"csrf": csrf, "q": "where does Dana sit?", "scope": "agent", "k": "10"},
            ),
        )
        hits = searcher.post(
            "/console/search", data={"csrf": csrf, "q": "where does Dana sit?", "scope": "agent"}
        )
        assert hits.text.count('class="memory-link"') == 10, "the search found no rows"
        article = re.search(
            r'/console/knowledge/([0-9a-f]{32})"', searcher.get("/console/knowledge").text
        )
        assert article is not None
        admin_pages = {
            "subjects_admin": lambda c: c.get("/console/subjects"),
            "sessions": lambda c: c.get("/console/sessions"),
            "session_200_turns": lambda c: c.get(
                "/console/session", params={"owner": f"{OWNER}\x1fu-17", "id": "s-long"}
            ),
            "knowledge": lambda c: c.get("/console/knowledge"),
            "article": lambda c: c.get(f"/console/knowledge/{article.group(1)}"),
        }
        for name, call in admin_pages.items():
            results[name] = timed(searcher, args.requests, call)
        searcher.close()
    finally:
        server.stop()
        if schema is not None:
            from tests.support.pg import drop_schema

            drop_schema(base_url, schema)
    report = {
        "rows_in_subject": args.rows,
        "requests_per_page": args.requests,
        "backend": "postgres" if schema else "sqlite",
        "seed_seconds": round(seeded, 1),
        "page_ms": results,
        "machine": machine(),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
