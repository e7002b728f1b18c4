"""Credentials stay off the screen and off the command line (OPS-1, API-5; issue 20 defect 15).

`quipu config` and `quipu serve` printed a DSN's password in full, and `quipu tokens mint`
took the service key only as ``--key`` (readable by every user through ``ps``). Credentials
are now masked by their type wherever settings are printed, and every command that needs a
key takes it from the environment or standard input.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
import pytest
from typer.testing import CliRunner

from quipu.surfaces.cli.app import app
from tests.conftest import PG_URL
from tests.support.chat_server import ChatServer

runner = CliRunner()
SECRETS = {
    "QUIPU_DATABASE": "postgresql://quipu:hunter2@db.internal:5432/quipu",
    "QUIPU_EMBEDDING_API_KEY": "sk-live-hunter3",
    "QUIPU_EXTRACTOR_BASE_URL": "http://bob:hunter4@llm.internal/v1",
    "QUIPU_EXTRACTOR_API_KEY": "sk-live-hunter5",
}


def _leaks(text: str) -> list[str]:
    return [f"hunter{n}" for n in range(2, 6) if f"hunter{n}" in text]


@pytest.mark.parametrize("as_json", [True, False])
def test_ops_001_config_masks_every_credential_by_type(as_json: bool) -> None:
    """Issue 20 defect 15: the DSN's password, a URL's userinfo and the API keys are masked."""
    result = runner.invoke(app, ["config", *(["--json"] if as_json else [])], env=SECRETS)
    assert result.exit_code == 0, result.stderr
    assert _leaks(result.stdout + result.stderr) == []
    if as_json:
        shown = {row["setting"]: row["value"] for row in json.loads(result.stdout)}
        assert shown["database"] == "postgresql://quipu:***@db.internal:5432/quipu"
        assert shown["extractor_base_url"] == "http://bob:***@llm.internal/v1"
        assert shown["embedding_api_key"] == shown["extractor_api_key"] == "***"
        assert shown["embedding_model"] is None  # nothing else is touched


def test_ops_001_config_masks_credentials_from_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "quipu.toml"
    config.write_text(
        '[quipu]\ndatabase = "postgres://admin:hunter2@10.0.0.5/q?sslmode=require"\n'
        'embedding_base_url = "https://api.example/v1?api_key=hunter3"\n'
    )
    result = runner.invoke(app, ["config", "--json", "--config", str(config)], env={})
    assert result.exit_code == 0 and _leaks(result.stdout) == []
    assert "postgres://admin:***@10.0.0.5/q?sslmode=require" in result.stdout


# -- keys from the environment or standard input --------------------------------------------
@pytest.fixture
def service_key(tmp_path: Path) -> tuple[str, str]:
    db = str(tmp_path / "keys.db")
    assert runner.invoke(app, ["tenants", "create", "acme", "--db", db]).exit_code == 0
    made = runner.invoke(
        app, ["keys", "create", "--tenant", "acme", "--role", "service", "--db", db, "--json"]
    )
    assert made.exit_code == 0, made.stderr
    return db, str(json.loads(made.stdout)["secret"])


def _mint(db: str, *extra: str, key_env: str | None = None, stdin: str | None = None) -> object:
    return runner.invoke(
        app,
        ["tokens", "mint", "--agent-id", "nightly", "--db", db, "--json", *extra],
        env={"QUIPU_API_KEY": key_env},
        input=stdin,
    )


def test_ops_001_tokens_mint_takes_the_key_from_the_environment(
    service_key: tuple[str, str],
) -> None:
    """Issue 20 defect 15: no secret on the command line (visible in ps)."""
    db, secret = service_key
    result = _mint(db, key_env=secret)
    assert result.exit_code == 0, result.stderr  # type: ignore[attr-defined]
    minted = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert minted["agent_id"] == "nightly" and minted["token"]
    assert "warning" not in result.stderr  # type: ignore[attr-defined]


def test_ops_001_tokens_mint_takes_the_key_from_stdin(service_key: tuple[str, str]) -> None:
    db, secret = service_key
    result = _mint(db, "--key-stdin", stdin=secret + "\n")
    assert result.exit_code == 0, result.stderr  # type: ignore[attr-defined]
    assert json.loads(result.stdout)["agent_id"] == "nightly"  # type: ignore[attr-defined]


def test_ops_001_tokens_mint_key_flag_still_works_with_a_warning(
    service_key: tuple[str, str],
) -> None:
    db, secret = service_key
    result = _mint(db, "--key", secret)
    assert result.exit_code == 0  # type: ignore[attr-defined]
    assert "ps" in result.stderr and "QUIPU_API_KEY" in result.stderr  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("extra", "key_env", "stdin", "says"),
    [
        ((), None, None, "no key given"),
        (("--key-stdin",), None, "\n", "no key given"),
        (("--key-stdin", "--key", "x"), None, "x\n", "not both"),
        (("--key-stdin",), None, "two words\n", "not an API key"),
        (("--key-stdin",), None, "nul\x00byte\n", "not an API key"),
        (("--key-stdin",), None, "k" * 3_000_000, "not an API key"),
        ((), "caf\u00e9", None, "not an API key"),
        ((), "lone\udcffsurrogate", None, "not an API key"),
    ],
)
def test_ops_001_tokens_mint_refuses_missing_or_malformed_keys(
    service_key: tuple[str, str],
    extra: tuple[str, ...],
    key_env: str | None,
    stdin: str | None,
    says: str,
) -> None:
    db, _ = service_key
    result = _mint(db, *extra, key_env=key_env, stdin=stdin)
    err = " ".join(result.stderr.split())  # type: ignore[attr-defined]
    assert result.exit_code == 2 and says in err, err  # type: ignore[attr-defined]
    assert "two words" not in err and "surrogate" not in err.replace("lone surrogate", "")


def test_ops_001_tokens_mint_with_a_wrong_key_is_unauthorized(
    service_key: tuple[str, str],
) -> None:
    db, _ = service_key
    result = _mint(db, key_env="qk_wrong_0123456789abcdef")
    assert result.exit_code == 1 and "unauthorized" in result.stderr  # type: ignore[attr-defined]


def test_ops_001_eval_promotion_takes_the_model_key_from_the_environment() -> None:
    """The extractor endpoint's key reaches the model from QUIPU_EXTRACTOR_API_KEY even when
    the URL and model are flags (before, only a visible --api-key did)."""
    server = ChatServer()
    try:
        result = runner.invoke(
            app,
            [
                *("eval", "promotion", "--extractor", "model", "--split", "test", "--json"),
                *("--base-url", server.url, "--model", "tiny-chat"),
            ],
            env={"QUIPU_EXTRACTOR_API_KEY": "sk-test-from-env-0123"},
        )
    finally:
        server.close()
    assert result.exit_code == 0, result.stderr
    assert server.requests
    assert {h["Authorization"] for _, h, _ in server.requests} == {"Bearer sk-test-from-env-0123"}


@pytest.mark.parametrize(
    "setting",
    [
        "embedding_api_key=sk-live-hunter3",
        "extractor_api_key=sk-live-hunter5",
        "embedding_base_url=http://bob:hunter4@llm.internal/v1",
    ],
)
def test_ops_001_set_takes_no_credentials(setting: str) -> None:
    """``--set`` values are recorded in benchmark JSON and visible in ps: no credentials."""
    result = runner.invoke(app, ["bench", "recall", "-n", "10", "--set", setting])
    assert result.exit_code == 2 and "takes no credentials" in " ".join(result.stderr.split())
    assert _leaks(result.stdout) == []


# -- quipu serve on PostgreSQL -----------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def pg_url_with_password() -> Iterator[str]:
    """The test database as a URL with a password (the throwaway server trusts local users,
    so the password is carried but not needed) in a fresh schema of its own."""
    if PG_URL is None:
        pytest.skip("needs PostgreSQL (scripts/with-testdb.sh)")
    from tests.support.pg import drop_schema, new_schema

    schema = new_schema(PG_URL, f"t_{uuid.uuid4().hex[:12]}")
    parts = urlsplit(PG_URL)
    host = parts.hostname or ""
    netloc = f"{quote(parts.username or 'postgres')}:hunter2@{host}"
    if parts.port:
        netloc += f":{parts.port}"
    options = quote(f"-c search_path={schema},public", safe="")
    query = "&".join(q for q in (parts.query, f"options={options}") if q)
    yield urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    drop_schema(PG_URL, schema)


@pytest.mark.postgres
def test_ops_001_serve_prints_no_password(pg_url_with_password: str, tmp_path: Path) -> None:
    """Issue 20 defect 15: `quipu serve` printed the DSN in full on start-up (twice more in
    the first-key hint of --auth). A real `quipu serve` process on a free port."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUIPU_")}
    env["QUIPU_DATABASE"] = pg_url_with_password
    env["COLUMNS"] = "500"  # one line per message: rich folds long words at the width
    process = subprocess.Popen(
        [sys.executable, "-m", "quipu", "serve", "--auth", "--port", str(port), "--workers", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
    finally:
        process.terminate()
        out, err = process.communicate(timeout=30)
    flat = " ".join(out.split())
    assert "OpenAPI docs" in flat, out + err
    assert "hunter2" not in out + err
    assert flat.count(":***@") == 3  # the start-up line and both commands of the hint
