"""`quipu articles` (issue 25, KNOW-1, KNOW-2): knowledge articles written, changed, shown,
searched and erased from the shell on a real SQLite file with the bundled model; text for
people, ``--json`` for scripts, every refusal its stable code."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from quipu.embeddings.local import LocalEmbedder
from quipu.surfaces.cli.app import app

runner = CliRunner()


def test_know_001_articles_from_the_shell(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    body = tmp_path / "release.md"
    body.write_text("Releases ship on Tuesdays after the standup.\n\nHotfixes any day.")
    made = runner.invoke(
        app, ["articles", "write", "Release calendar", "--file", str(body), "--tag", "ops",
              "--db", db, "--json"]
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    written = json.loads(made.stdout)
    article_id = written["article"]["id"]
    assert (written["verdict"], written["article"]["tags"]) == ("created", ["ops"])
    again = runner.invoke(
        app, ["articles", "write", "Release calendar", "--file", str(body), "--db", db]
    )
    assert again.exit_code == 0 and again.stdout.startswith(f"deduplicated: {article_id} v1")
    changed = runner.invoke(
        app, ["articles", "update", article_id, "--expected-version", "1",
              "--body", "Releases ship on Tuesdays at 10:00.", "--reason", "time", "--db", db]
    )  # fmt: skip
    assert changed.exit_code == 0 and changed.stdout.startswith(f"updated: {article_id} v2")
    shown = runner.invoke(app, ["articles", "show", article_id, "--db", db])
    assert "Release calendar" in shown.stdout and "Tuesdays at 10:00" in shown.stdout
    versions = json.loads(
        runner.invoke(app, ["articles", "history", article_id, "--db", db, "--json"]).stdout
    )
    assert [v["version"] for v in versions] == [1, 2]
    found = json.loads(
        runner.invoke(
            app, ["articles", "search", "when do releases ship", "--db", db, "--json"]
        ).stdout
    )
    assert found["results"][0]["id"] == article_id and "body" not in found["results"][0]
    table = runner.invoke(app, ["articles", "search", "releases", "--db", db])
    assert article_id in table.stdout  # ids are never cut
    listed = json.loads(
        runner.invoke(app, ["articles", "list", "--tag", "ops", "--db", db, "--json"]).stdout
    )
    assert [a["id"] for a in listed["items"]] == [article_id] and "body" not in listed["items"][0]
    assert listed["next_cursor"] is None
    listing = runner.invoke(app, ["articles", "list", "--status", "published", "--db", db])
    assert listing.exit_code == 0 and article_id in listing.stdout
    hostile = runner.invoke(app, ["articles", "list", "--cursor", "../x", "--db", db])
    assert hostile.exit_code == 1 and "invalid_cursor:" in hostile.stderr
    too_many = runner.invoke(app, ["articles", "list", "--limit", "1000", "--db", db])
    assert too_many.exit_code == 1 and "invalid_limit:" in too_many.stderr
    stale = runner.invoke(
        app, ["articles", "update", article_id, "--expected-version", "1", "--body", "x",
              "--db", db]
    )  # fmt: skip
    assert stale.exit_code == 1 and "version_conflict:" in stale.stderr
    erased = runner.invoke(
        app, ["articles", "erase", article_id, "--reason", "moved to the wiki", "--db", db]
    )
    assert erased.exit_code == 0 and f"erased {article_id}" in erased.stdout
    gone = runner.invoke(app, ["articles", "show", article_id, "--db", db])
    assert gone.exit_code == 1 and "not_found:" in gone.stderr


def test_know_001_article_arguments_refused_with_their_code(tmp_path: Path) -> None:
    db = str(tmp_path / "b.db")
    bodiless = runner.invoke(app, ["articles", "write", "No body", "--db", db])
    assert bodiless.exit_code == 1 and "invalid_body:" in bodiless.stderr
    missing = runner.invoke(
        app, ["articles", "write", "T", "--file", str(tmp_path / "absent.md"), "--db", db]
    )
    assert missing.exit_code == 1 and "invalid_file:" in missing.stderr
    bad_id = runner.invoke(app, ["articles", "show", "../etc", "--db", db])
    assert bad_id.exit_code == 1 and "Traceback" not in bad_id.output


def test_know_001_articles_on_a_server(tmp_path: Path, local_embedder: LocalEmbedder) -> None:
    """`--db http://…`: the same commands are requests to the server through quipu.Client;
    the server's refusal comes back with its code (a key without the erase grant)."""
    from quipu.auth.access import Access
    from quipu.composition import load_settings
    from quipu.surfaces.http.server import build_server
    from tests.support.live_server import LiveServer

    settings = load_settings(
        {"database": str(tmp_path / "srv.db"), "auth": True, "worker_embedded": False},
        environ={},
    )
    api, runtime = build_server(settings, embedder=local_embedder)
    access: Access = api.state.access
    access.create_tenant("t")
    admin = access.create_key("t", "admin", agent_id="ops")[1]
    agent = access.create_key("t", "agent", agent_id="a1", user_id="u1")[1]
    live = LiveServer(api)
    try:
        as_admin = {"QUIPU_API_KEY": admin, "QUIPU_DATABASE": None}
        made = runner.invoke(
            app,
            ["articles", "write", "On-call", "--body", "The rota flips on Mondays.",
             "--db", live.url, "--json"],
            env=as_admin,
        )  # fmt: skip
        assert made.exit_code == 0, made.output
        article_id = json.loads(made.stdout)["article"]["id"]
        found = runner.invoke(
            app,
            ["articles", "search", "when does the rota flip", "--db", live.url, "--json"],
            env={"QUIPU_API_KEY": agent, "QUIPU_DATABASE": None},
        )
        assert json.loads(found.stdout)["results"][0]["id"] == article_id
        refused = runner.invoke(
            app,
            ["articles", "erase", article_id, "--reason", "mine?", "--db", live.url],
            env={"QUIPU_API_KEY": agent, "QUIPU_DATABASE": None},
        )
        assert refused.exit_code == 1 and "erase_forbidden:" in refused.stderr
    finally:
        live.close()
        runtime.close()
