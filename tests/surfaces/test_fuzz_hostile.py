"""Property-based hostile input on every HTTP route and every MCP tool (issue 20, "make the
class impossible"; SAFE-5, API-2, API-3).

Routes are read from the served OpenAPI document and tools from the MCP server's own
``tools/list``, so a new route or tool is fuzzed without touching this file. Each example puts
one hostile value in one slot (a body field, the whole body, a query or path parameter, a tool
argument) and valid values everywhere else: lone surrogates, NUL, id separators, deep JSON,
huge and non-finite numbers, oversized strings and bodies, wrong types. After every example:

- the answer is never a 5xx (nor, over MCP, an internal JSON-RPC error or an uncoded tool
  error);
- after a refusal, no row was written (every table a request may write is counted);
- the tenant's scope still lists, recalls, reads its session and exports.

Hypothesis runs derandomized (a fixed seed) with a bounded example count per route and tool.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import quote

import anyio
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from quipu import transfer
from quipu.auth.access import Access
from quipu.composition import load_settings, local_principal
from quipu.core.records import Principal
from quipu.embeddings.local import LocalEmbedder
from quipu.runtime import Runtime
from quipu.surfaces.http.app import create_app
from quipu.surfaces.http.auth import local_resolver
from quipu.surfaces.http.server import build_server
from quipu.surfaces.mcp import create_mcp_server, fixed_principal
from quipu.surfaces.mcp.documents import DOCUMENT_TOOL_NAMES
from quipu.surfaces.mcp.governance import GOVERNANCE_TOOL_NAMES
from quipu.surfaces.mcp.graph import GRAPH_TOOL_NAMES
from quipu.surfaces.mcp.index import INDEX_TOOL_NAMES
from quipu.surfaces.mcp.knowledge import KNOWLEDGE_TOOL_NAMES
from quipu.surfaces.mcp.kv import KV_TOOL_NAMES
from quipu.surfaces.mcp.memory_batch import BATCH_TOOL_NAMES
from quipu.surfaces.mcp.placement import PLACEMENT_TOOL_NAMES
from quipu.surfaces.mcp.search import SEARCH_TOOL_NAMES
from tests.conftest import SERVER_BACKENDS
from tests.surfaces.databases import fresh_database

#: Examples per route and per tool, on each backend.
EXAMPLES = {"sqlite": 20, "postgres": 6}
#: Tables a request may write. A refused request must leave every count unchanged.
COUNTED = ("memory_versions", "memory_aliases", "session_turns", "jobs", "credentials", "tenants")
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
CODED = re.compile(r"^[a-z][a-z0-9_]*: ")


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


# -- hostile values ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Raw:
    """JSON text spliced into a body as is (deep nesting, NaN): ``json.dumps`` cannot make it."""

    text: str


def _nested(depth: int) -> Raw:
    return Raw('{"a":' * (depth - 1) + "[]" + "}" * (depth - 1))


SEPARATORS = ["\x1f", "/", "\\", ":", "..", "%2F", "\u2028", "\u200b", "\t", "#", "?", " "]
HUGE = [2**63, 2**63 - 1, -(2**63) - 1, 2**64, 10**30, -(10**30), 9714838460313728]


@st.composite
def bad_text(draw: st.DrawFn) -> str:
    """A plausible string with something hostile inside."""
    hostile = draw(
        st.one_of(
            st.integers(0xD800, 0xDFFF).map(chr),  # a lone surrogate
            st.just("\x00"),
            st.sampled_from(SEPARATORS),
            st.sampled_from(["\ufeff", "\u0301", "\U0001f600", "\x7f", "\r\n"]),
        )
    )
    head = draw(st.sampled_from(["", "note ", "a1", "s1"]))
    return head + hostile + draw(st.sampled_from(["", "x", " tail"]))


def hostile_json() -> st.SearchStrategy[Any]:
    """Any hostile JSON value."""
    return st.one_of(
        bad_text(),
        st.sampled_from(HUGE),
        NUMBERS,
        DEEP,
        st.sampled_from([None, True, 0, -1, "", " ", [], {}]),
        OVERSIZED,
        st.lists(bad_text(), min_size=1, max_size=3),
        st.dictionaries(bad_text(), st.one_of(bad_text(), st.sampled_from(HUGE)), min_size=1),
        st.lists(st.sampled_from(HUGE), min_size=1, max_size=2),
    )


NUMBERS = st.sampled_from([Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), 1e308, -1e308, 5e-324])
DEEP = st.sampled_from([8, 9, 31, 32, 33, 300, 1000, 5000]).map(_nested)
OVERSIZED = st.sampled_from([4_097, 70_000, 1_100_000]).map(lambda n: "x" * n)


def hostile_for(json_type: str) -> st.SearchStrategy[Any]:
    """A hostile value of the slot's own type most of the time (so it gets past type checks
    and reaches the service), any hostile value otherwise."""
    typed = {
        "string": st.one_of(bad_text(), OVERSIZED),
        "array": st.one_of(
            st.lists(bad_text(), min_size=1, max_size=3),
            st.lists(OVERSIZED, min_size=1, max_size=1),
            DEEP.map(lambda raw: [raw]),
        ),
        "object": st.one_of(
            st.dictionaries(bad_text(), st.just("v"), min_size=1, max_size=2),
            st.dictionaries(st.just("k"), st.one_of(bad_text(), st.sampled_from(HUGE)), min_size=1),
            st.dictionaries(st.just("k"), st.lists(bad_text(), min_size=1), min_size=1),
            st.dictionaries(st.just("k"), DEEP, min_size=1),
        ),
        "integer": st.one_of(st.sampled_from(HUGE), NUMBERS),
        "number": st.one_of(NUMBERS, st.sampled_from(HUGE)),
    }.get(json_type)
    if typed is None:
        return hostile_json()
    return st.one_of(typed, typed, typed, hostile_json())


def hostile_param(json_type: str = "string") -> st.SearchStrategy[list[str]]:
    """Hostile values of one query or path parameter, as text (encoded by :func:`_pct`); an
    array parameter repeats."""
    one = st.one_of(
        bad_text(),
        st.sampled_from([str(n) for n in HUGE]),
        st.sampled_from(["1e999", "NaN", "-0", "0x10", "²", "٣", "", "9" * 400]),
        st.sampled_from([100, 10_000]).map(lambda n: "y" * n),
    )
    if json_type == "integer":
        one = st.one_of(st.sampled_from([str(n) for n in HUGE] + ["1e999", "²", "-1"]), one)
    if json_type == "array":
        return st.lists(one, min_size=1, max_size=3)
    return one.map(lambda value: [value])


def _pct(text: str) -> str:
    """Percent-encoded bytes; a lone surrogate goes out as its (invalid) UTF-8 bytes."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def encode(value: Any, *, escaped: bool = True) -> str:
    """JSON text of ``value``, :class:`Raw` parts spliced in; non-ASCII as escapes, or (not
    ``escaped``) as is, so a lone surrogate goes out as its UTF-8 bytes."""
    raws: list[str] = []

    def mark(item: Any) -> Any:
        if isinstance(item, Raw):
            raws.append(item.text)
            return f"\x00RAW{len(raws) - 1}\x00"
        if isinstance(item, dict):
            return {k: mark(v) for k, v in item.items()}
        if isinstance(item, list):
            return [mark(v) for v in item]
        return item

    text = json.dumps(mark(value), ensure_ascii=escaped)
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x00RAW{i}\x00"), raw)
    return text


# -- the world: `quipu serve --auth` in process --------------------------------------------------
@dataclass
class World:
    client: TestClient
    runtime: Runtime
    count: Callable[[str], int]  # rows of one table, read outside the service
    keys: dict[str, str]
    principal: Principal
    examples: int
    base: dict[str, Any] = field(default_factory=dict)

    def headers(self, who: str) -> dict[str, str]:
        extra = {"X-Quipu-Tenant": "t"} if who == "root" else {}
        return {"Authorization": f"Bearer {self.keys[who]}", **extra}

    def rows(self) -> dict[str, int]:
        return {table: self.count(table) for table in COUNTED}

    def assert_scope_healthy(self) -> None:
        h = self.headers("admin")
        listed = self.client.get("/v1/memories", headers=h)
        assert listed.status_code == 200, listed.text
        recalled = self.client.post("/v1/recall", json={"query": "office cat"}, headers=h)
        assert recalled.status_code == 200, recalled.text
        turns = self.client.get("/v1/sessions/s1/turns", headers=h)
        assert turns.status_code == 200, turns.text
        out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
        for _ in transfer.write(out, self.runtime.service.export(self.principal)):
            pass
        out.flush()


@pytest.fixture(scope="module", params=SERVER_BACKENDS)
def world(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    local_embedder: LocalEmbedder,
) -> Iterator[World]:
    """`quipu serve --auth` on each backend (fewer examples on PostgreSQL, which is slower)."""
    backend = str(request.param)
    with fresh_database(backend, tmp_path_factory.mktemp("fuzz")) as (database, count):
        s = load_settings(
            {
                "database": database,
                "auth": True,
                "rate_limit_per_second": 100_000,
                "rate_limit_burst": 1_000_000,
            },
            environ={},
        )
        app, runtime = build_server(s, local_embedder)
        access: Access = app.state.access
        access.create_tenant("t")
        keys = {
            "admin": access.create_key("t", "admin", agent_id="a1", user_id="u1")[1],
            "service": access.create_key("t", "service")[1],
            "root": access.create_key("t", "superadmin")[1],
        }
        principal = access.authenticate(keys["admin"])
        examples = EXAMPLES[backend]
        with TestClient(app, raise_server_exceptions=False) as client:
            w = World(client, runtime, count, keys, principal, examples)
            h = w.headers("admin")
            ids = [
                client.post("/v1/memories", json={"text": t}, headers=h).json()["memory"]["id"]
                for t in ("The office cat is called Miso", "Deploys happen on Tuesdays")
            ]
            client.post("/v1/sessions/s1/turns", json={"role": "user", "content": "hi"}, headers=h)
            job = client.post("/v1/sessions/s1/promote", headers=h).json()["job"]["job_id"]
            w.base = {"memory_id": ids[0], "new_id": ids[1], "old_id": ids[0], "job_id": job}
            yield w
        runtime.close()


# -- every HTTP route ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    method: str
    path: str
    body: tuple[tuple[str, bool, str], ...]  # (name, required, JSON type)
    query: tuple[tuple[str, bool, str], ...]  # (name, required, JSON type)
    params: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def _routes() -> list[Route]:
    s = load_settings({"database": ":memory:"}, environ={})
    spec = create_app(cast(Any, None), local_resolver(local_principal(s))).openapi()
    schemas = spec["components"]["schemas"]
    found = []
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            ref = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            body: tuple[tuple[str, bool, str], ...] = ()
            if "$ref" in ref.get("schema", {}):
                schema = schemas[ref["schema"]["$ref"].rsplit("/", 1)[1]]
                required = set(schema.get("required", ()))
                body = tuple(
                    (name, name in required, _json_type(prop))
                    for name, prop in schema["properties"].items()
                )
            params = op.get("parameters", [])
            found.append(
                Route(
                    method.upper(),
                    path,
                    body,
                    tuple(
                        (p["name"], p.get("required", False), _json_type(p["schema"]))
                        for p in params
                        if p["in"] == "query"
                    ),
                    tuple(p["name"] for p in params if p["in"] == "path"),
                )
            )
    return found


def _json_type(prop: dict[str, Any]) -> str:
    types = [prop.get("type")] + [a.get("type") for a in prop.get("anyOf", [])]
    return next((t for t in types if t and t != "null"), "string")


ROUTES = _routes()
VALID: dict[str, Any] = {
    "text": "a fuzzed note about the office",
    "query": "office cat",
    "role": "user",
    "content": "hello there",
    "agent_id": "agent-f",
    "scope": "agent",
    "owner": "a1",
    "subject": "Anna",  # issue 26: graph_facts
}
DEFAULTS = {"string": "x", "integer": 1, "number": 0.5, "boolean": True, "array": [], "object": {}}


def _who(route: Route) -> str:
    if route.path.startswith("/v1/admin"):
        return "root"
    return "service" if route.path == "/v1/tokens" else "admin"


@st.composite
def hostile_request(draw: st.DrawFn, route: Route, base: dict[str, Any]) -> tuple[str, str | None]:
    """(URL, JSON body text) with one slot hostile."""
    slots = (
        [("body", n) for n, _, _ in route.body]
        + [("query", n) for n, _, _ in route.query]
        + [("path", n) for n in route.params]
        + ([("whole", "")] if route.body else [])
    )
    if not slots:
        slots = [("query", "unexpected")]
    kind, name = draw(st.sampled_from(slots))
    values = {**VALID, **base}
    path = route.path
    for p in route.params:
        value = (
            draw(hostile_param())[0] if (kind, name) == ("path", p) else str(values.get(p, "s1"))
        )
        path = path.replace("{" + p + "}", _pct(value))
    query = [
        f"{n}={_pct(str(values[n]))}" for n, required, _ in route.query if required and n != name
    ]
    if kind == "query":
        types = {n: t for n, _, t in route.query}
        hostile = draw(hostile_param(types.get(name, "string")))
        query.extend(f"{name}={_pct(value)}" for value in hostile)
    url = path + ("?" + "&".join(query) if query else "")
    if not route.body:
        return url, None
    escaped = draw(st.booleans())
    if kind == "whole":
        return url, encode(draw(hostile_json()), escaped=escaped)
    payload = {n: values.get(n, DEFAULTS[t]) for n, required, t in route.body if required}
    if kind == "body":
        types = {n: t for n, _, t in route.body}
        payload[name] = draw(hostile_for(types[name]))
    return url, encode(payload, escaped=escaped)


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_safe_005_issue20_hostile_input_on_every_route(world: World, route: Route) -> None:
    seen: dict[int, int] = {}

    @fuzz(world.examples)
    @given(request=hostile_request(route, world.base))
    def check(request: tuple[str, str | None]) -> None:
        url, body = request
        before = world.rows()
        headers = {**world.headers(_who(route)), "Content-Type": "application/json"}
        content = None if body is None else body.encode("utf-8", "surrogatepass")
        r = world.client.request(route.method, url, content=content, headers=headers)
        seen[r.status_code] = seen.get(r.status_code, 0) + 1
        assert r.status_code < 500, (url, (body or "")[:300], r.text[:500])
        if r.headers.get("content-type", "").startswith("application/x-ndjson"):
            assert all(json.loads(line) is not None for line in r.text.splitlines())  # export
        elif r.headers.get("content-type", "").startswith("text/plain"):
            assert r.text.startswith("# HELP")  # /metrics: the Prometheus text format
        else:
            assert r.json() is not None
        if r.status_code >= 400:
            assert "error" in r.json() and world.rows() == before, (url, r.text[:300])
        world.assert_scope_healthy()

    check()
    assert sum(seen.values()) >= world.examples // 2, seen


# -- every MCP tool, over streamable HTTP --------------------------------------------------------
def _tools(world: World) -> dict[str, dict[str, Any]]:
    r = world.client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={**MCP_HEADERS, **world.headers("admin")},
    )
    return {t["name"]: t["inputSchema"] for t in r.json()["result"]["tools"]}


TOOLS = [
    "memory_remember",
    "memory_recall",
    "memory_list",
    "memory_get",
    "memory_history",
    "memory_revise",
    "memory_supersede",
    "memory_forget",
    "session_append",
    "session_history",
    "memory_promote",
    *GOVERNANCE_TOOL_NAMES,  # issue 22
    *KV_TOOL_NAMES,  # issue 28
    *DOCUMENT_TOOL_NAMES,
    *SEARCH_TOOL_NAMES,
    *KNOWLEDGE_TOOL_NAMES,  # issue 25
    *INDEX_TOOL_NAMES,  # issue 24
    *GRAPH_TOOL_NAMES,  # issue 26
    *PLACEMENT_TOOL_NAMES,  # issue 26, GRAPH-2
    *BATCH_TOOL_NAMES,  # issue 23, the bulk write
]
TOOL_VALID = {**VALID, "session_id": "s1"}


def test_api_003_the_fuzzed_tools_are_every_tool(world: World) -> None:
    assert sorted(_tools(world)) == sorted(TOOLS)


@st.composite
def hostile_call(draw: st.DrawFn, schema: dict[str, Any], base: dict[str, Any]) -> str:
    names = sorted(schema["properties"])
    required = set(schema.get("required", ()))
    target = draw(st.sampled_from([*names, ""]))
    values = {**TOOL_VALID, **base}
    arguments: Any = {n: values.get(n, "x") for n in names if n in required and n != target}
    if target:
        arguments[target] = draw(hostile_for(_json_type(schema["properties"][target])))
    else:
        arguments = draw(hostile_json())  # the arguments object itself
    message = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"arguments": arguments},
    }
    return encode(message, escaped=draw(st.booleans()))


@pytest.mark.parametrize("tool", TOOLS)
def test_api_003_issue20_hostile_arguments_on_every_mcp_tool(world: World, tool: str) -> None:
    schema = _tools(world)[tool]

    @fuzz(world.examples)
    @given(message=hostile_call(schema, world.base))
    def check(message: str) -> None:
        message = message.replace('"params": {', f'"params": {{"name": "{tool}", ', 1)
        before = world.rows()
        r = world.client.post(
            "/mcp",
            content=message.encode("utf-8", "surrogatepass"),
            headers={**MCP_HEADERS, **world.headers("admin")},
        )
        assert r.status_code < 500, (message[:300], r.text[:500])
        answer = r.json()
        refused = r.status_code >= 400 or "error" in answer
        if "error" in answer:
            assert answer["error"]["code"] != -32603, answer  # internal error
        else:
            result = answer["result"]
            if result.get("isError"):
                text = "".join(c.get("text", "") for c in result["content"])
                assert CODED.match(text), text[:300]
                assert result["structuredContent"]["error"]["code"] != "internal_error"
                refused = True
        if refused:
            assert world.rows() == before, (message[:300], answer)
        world.assert_scope_healthy()

    check()


# -- the service boundary, seen through the MCP tools (lead: issue 20 defect 2) ------------------
def _call(world: World, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """Call a tool in process (arguments reach it as Python strings, as from any client that
    bypasses the transport's screen): (refused with a code, the answer's text)."""
    service = world.runtime.service
    server = create_mcp_server(
        service, fixed_principal(world.principal), sessions=world.runtime.sessions
    )

    async def main() -> tuple[bool, str]:
        async with Client(server) as client:
            result = await client.call_tool(tool, arguments)
            text = "".join(getattr(c, "text", "") for c in result.content)
            return bool(result.is_error), text

    return anyio.run(main)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        pytest.param("memory_remember", {"text": "ok \ud800"}, id="remember-text"),
        pytest.param("memory_remember", {"text": "ok \x00"}, id="remember-text-nul"),
        pytest.param("memory_remember", {"text": "ok", "tags": ["\ud800"]}, id="tags"),
        pytest.param("memory_remember", {"text": "ok", "aliases": ["\ud800"]}, id="aliases"),
        # A lone surrogate in a metadata *key* cannot be sent by the in-process MCP client (its
        # request serialiser refuses it); the service refuses it too: tests/contract/
        # test_hostile_input_contract.py, and over raw JSON test_transport_json.py.
        pytest.param(
            "memory_remember",
            {"text": "ok", "metadata": {"k": "\ud800"}},
            id="metadata-value",
        ),
        pytest.param("memory_remember", {"text": "ok", "project": "\ud800"}, id="project"),
        pytest.param("memory_remember", {"text": "ok", "run_id": "\ud800"}, id="run_id"),
        pytest.param("memory_remember", {"text": "ok", "quote": "\ud800"}, id="quote"),
        pytest.param("memory_remember", {"text": "ok", "session_id": "\ud800"}, id="session_id"),
        pytest.param(
            "session_append",
            {"session_id": "s9", "role": "user", "content": "hi", "metadata": {"k": "\ud800"}},
            id="turn-metadata",
        ),
        pytest.param(
            "memory_remember",
            {"text": "ok", "metadata": {"k": "a\x00b"}},
            id="metadata-nul",
        ),
    ],
)
def test_safe_005_issue20_d2_invalid_text_never_reaches_storage(
    world: World, tool: str, arguments: dict[str, Any]
) -> None:
    """Whatever the surface, a string that is not valid Unicode text is refused with a code
    and nothing is written (the transport screen is one layer; the service must be another)."""
    before = world.rows()
    refused, text = _call(world, tool, arguments)
    assert refused and CODED.match(text) and not text.startswith("internal_error"), text[:300]
    assert world.rows() == before
