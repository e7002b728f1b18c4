"""Property-based requests generated from the served OpenAPI document (SAFE-5, API-2): no input
yields a 500, and every response matches the documented schema. The example count is bounded and
the seed fixed (derandomized) so `make test` stays fast and repeatable; hostile input (lone
surrogates, NUL, deep JSON, huge numbers) on every route and MCP tool is test_fuzz_hostile.py."""

from __future__ import annotations

import tempfile
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from quipu.composition import load_settings, local_principal
from quipu.core.limits import Limits
from quipu.embeddings.local import LocalEmbedder
from quipu.memories import MemoryService
from quipu.storage.sqlite.store import SQLiteStore
from quipu.surfaces.http.app import create_app
from quipu.surfaces.http.auth import local_resolver

_dir = tempfile.TemporaryDirectory(prefix="quipu-fuzz-")
_settings = load_settings({"database": str(Path(_dir.name) / "fuzz.db")}, environ={})
_service = MemoryService(SQLiteStore(_settings.database), LocalEmbedder(), Limits())
_principal = local_principal(_settings, "http")
_app = create_app(_service, local_resolver(_principal))
_service.remember(_principal, "a seed memory so reads have something to find")

schema = schemathesis.openapi.from_asgi("/openapi.json", _app)

#: No 500 ever; status codes, content types, headers and bodies as documented. Positive-data
#: acceptance is left out on purpose: the service's own validation (blank text, sizes, secrets)
#: is stricter than the JSON schema, and says so with a documented 4xx.
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
]


@schema.parametrize()
@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_safe_005_no_input_breaks_the_api(case: schemathesis.Case) -> None:
    case.call_and_validate(checks=CHECKS)
