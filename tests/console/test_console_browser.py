"""The operator console (issue 29, OPS-4) in a real browser: Playwright drives Debian's
Chromium against a real `quipu serve --auth` on SQLite and on PostgreSQL. Every act goes
through the console's forms as an operator would; the API, called with the agent's own key,
writes what the operator then inspects. Screenshots land in docs/console/ (docs/console.md)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PG_URL, SERVER_BACKENDS
from tests.support.console_server import SCREENSHOTS, ConsoleServer, open_store, start

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="the console's browser tests need Debian's Chromium at /usr/bin/chromium "
    "(apt-get install -y chromium; make test installs it)",
)
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
XSS = "Prefers <script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\"> seats"


@pytest.fixture(scope="module", params=SERVER_BACKENDS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleServer]:
    workdir = tmp_path_factory.mktemp("console")
    schema = None
    if request.param == "postgres":
        from tests.support.pg import drop_schema, new_schema, schema_url

        assert PG_URL is not None
        schema = new_schema(PG_URL, f"console_{uuid.uuid4().hex[:10]}")
        db = schema_url(PG_URL, schema)
    else:
        db = str(workdir / "console.db")
    running = start(db, workdir)
    running.backend = request.param  # type: ignore[attr-defined]
    yield running
    running.stop()
    if schema is not None:
        assert PG_URL is not None
        drop_schema(PG_URL, schema)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(30_000)
    yield tab
    context.close()


def shot(server: ConsoleServer, page: Any, name: str) -> None:
    """Keep a screenshot of the page for docs/console.md (from the SQLite run)."""
    if getattr(server, "backend", "sqlite") == "sqlite":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def sign_in(server: ConsoleServer, page: Any, who: str, tenant: str | None = None) -> Any:
    page.goto(f"{server.url}/console/sign-in")
    page.fill("#key", server.keys[who])
    if tenant:
        page.fill("#tenant-field", tenant)
    page.click("#sign-in")
    return page


def act(page: Any, name: str, reason: str, **fields: str) -> None:
    """Fill one of the memory page's govern forms and send it."""
    for field_id, value in fields.items():
        page.fill(f"#form-{name} #{field_id}", value)
    page.fill(f"#reason-{name}", reason)
    page.click(f"#do-{name}")


def test_ops_4_sign_in_search_and_sign_out(server: ConsoleServer, page: Any) -> None:
    server.remember("admin", "Acme's refund window is 30 days", scope="tenant", tags=["policy"])
    server.remember("admin", "Acme ships to Canada and Mexico", scope="tenant")
    page.goto(f"{server.url}/console/subjects")
    assert page.url.endswith("/console/sign-in")  # no session: to the sign-in form
    shot(server, page, "sign-in")
    sign_in(server, page, "admin")
    assert page.url.endswith("/console/subjects")
    assert page.inner_text("#tenant") == "acme"
    cookie = next(c for c in page.context.cookies() if c["name"] == "quipu_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert server.keys["admin"] not in cookie["value"]
    page.goto(f"{server.url}/console/search")
    page.fill("#q", "how long do refunds take?")
    page.select_option("#scope", "tenant")
    page.click("#search")
    assert "/console/search" in page.url and "refund" not in page.url  # posted, not in the URL
    first = page.locator("#hits li").first
    assert "refund window is 30 days" in first.inner_text()
    assert "score" in first.inner_text()
    assert '"total_ms"' in page.inner_text("#timings")
    curl = page.inner_text("#curl")
    assert "/v1/recall" in curl and "$QUIPU_API_KEY" in curl and server.keys["admin"] not in curl
    shot(server, page, "search")
    page.click("#sign-out")
    assert page.url.endswith("/console/sign-in")
    page.goto(f"{server.url}/console/subjects")
    assert page.url.endswith("/console/sign-in")  # the session is gone server-side
