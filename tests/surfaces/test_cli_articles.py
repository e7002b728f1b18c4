"""`quipu articles` (issue 25, KNOW-1, KNOW-2): knowledge articles written, changed, shown,
searched and erased from the shell on a real SQLite file with the bundled model; text for
people, ``--json`` for scripts, every refusal its stable code."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

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
