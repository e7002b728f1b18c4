"""CLI output for people and for scripts (issue 27, API-4): tables never cut ids, `--json` on
every command that prints for people, `--quiet` for the one value a script wants, and every
error printed with its stable code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import typer.main
from typer.testing import CliRunner

from quipu.surfaces.cli.app import app

runner = CliRunner()
#: Commands that print JSON whatever the flags, or run until stopped and print no result.
NO_JSON_FLAG = {
    "quipu serve",
    "quipu mcp",
    "quipu migrate",
    "quipu bench ingest",
    "quipu bench recall",
    "quipu bench http",
    "quipu bench promote",
    # benches print their JSON result (and --out writes it); eval generate-tech writes files
    "quipu bench documents",
    "quipu bench documents-scale",
    "quipu bench knowledge",
    "quipu bench scale",
    "quipu eval generate-tech",
    # the planes' commands print JSON only, for people and scripts alike
    "quipu search",
    "quipu kv set",
    "quipu kv get",
    "quipu kv list",
    "quipu kv history",
    "quipu kv delete",
    "quipu documents add",
    "quipu documents search",
    "quipu documents read",
    "quipu documents list",
    "quipu documents delete",
    "quipu graph recall",
    "quipu graph facts",
    "quipu graph ontology",
    "quipu graph placement",
    "quipu graph backfill",
    "quipu graph merge",
    "quipu graph revert",
    "quipu graph history",
    "quipu sessions append",
    "quipu sessions history",
    "quipu sessions promote",
}


def _commands(group: typer.core.TyperGroup, prefix: str) -> dict[str, object]:
    found: dict[str, object] = {}
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            found.update(_commands(command, f"{prefix} {name}"))
        else:
            found[f"{prefix} {name}"] = command
    return found


def test_api_004_every_command_that_prints_for_people_takes_json() -> None:
    commands = _commands(typer.main.get_command(app), "quipu")
    missing = [
        name
        for name, command in commands.items()
        if name not in NO_JSON_FLAG
        and "--json" not in [o for p in command.params for o in getattr(p, "opts", [])]
    ]
    assert missing == []


def test_api_004_tables_never_cut_ids(tmp_path: Path) -> None:
    db = str(tmp_path / "ids.db")
    narrow = {"COLUMNS": "40"}
    made = runner.invoke(app, ["remember", "A rather long memory text " * 4, "--db", db, "-q"])
    mid = made.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{32}", mid), made.stdout
    listed = runner.invoke(app, ["list", "--db", db], env=narrow)
    assert listed.exit_code == 0 and mid in listed.stdout, listed.stdout
    assert "rather" in listed.stdout  # too narrow for a table: name: value lines, nothing lost
    wide = runner.invoke(app, ["list", "--db", db], env={"COLUMNS": "80"})
    assert mid in wide.stdout and "┃ id" in wide.stdout
    found = runner.invoke(app, ["recall", "long memory", "--db", db], env=narrow)
    assert mid in found.stdout, found.stdout
    runner.invoke(app, ["tenants", "create", "acme", "--db", db])
    secret = runner.invoke(
        app, ["keys", "create", "--tenant", "acme", "--role", "agent", "--db", db, "-q"]
    ).stdout.strip()
    key_id = secret.split("_")[1]
    assert re.fullmatch(r"qk_[0-9a-f]{16}_\S+", secret)
    keys = runner.invoke(app, ["keys", "list", "--tenant", "acme", "--db", db], env=narrow)
    assert key_id in keys.stdout, keys.stdout


def test_api_004_a_table_sent_to_a_pipe_keeps_each_row_on_one_line(tmp_path: Path) -> None:
    """Not a terminal and no COLUMNS: rich's 80 columns wrapped the text column to a few
    characters; piped output is as wide as its rows (CliRunner's stdout is no terminal)."""
    db = str(tmp_path / "pipe.db")
    text = "Dana prefers window seats on long flights and books the exit row when she can"
    assert runner.invoke(app, ["remember", text, "--db", db, "-q"]).exit_code == 0
    piped = runner.invoke(app, ["list", "--db", db], env={"COLUMNS": ""})
    assert piped.exit_code == 0
    assert any(text in line for line in piped.stdout.splitlines()), piped.stdout
    narrow = runner.invoke(app, ["list", "--db", db], env={"COLUMNS": "60"})
    assert not any(text in line for line in narrow.stdout.splitlines())  # COLUMNS still wins


def test_api_004_json_for_scripts(tmp_path: Path) -> None:
    db = str(tmp_path / "j.db")
    assert json.loads(runner.invoke(app, ["reindex", "--db", db, "--json"]).stdout) == {
        "embedded": 0
    }
    assert (
        json.loads(runner.invoke(app, ["worker", "--once", "--db", db, "--json"]).stdout)["ran"]
        >= 0
    )
    runner.invoke(app, ["tenants", "create", "acme", "--db", db])
    made = json.loads(
        runner.invoke(
            app, ["keys", "create", "--tenant", "acme", "--role", "agent", "--db", db, "--json"]
        ).stdout
    )
    revoked = runner.invoke(
        app, ["keys", "revoke", made["key_id"], "--tenant", "acme", "--db", db, "--json"]
    )
    assert json.loads(revoked.stdout) == {"revoked": made["key_id"], "tenant_id": "acme"}
    summary = runner.invoke(
        app, ["eval", "generate", "--out", str(tmp_path / "c"), "--conversations", "1", "--json"]
    )
    assert json.loads(summary.stdout)["conversations"] == 1


def test_api_004_every_error_prints_its_stable_code(tmp_path: Path) -> None:
    db = str(tmp_path / "e.db")
    for args, code in (
        (["get", "0" * 32, "--db", db], "not_found"),
        (["jobs", "cancel", "nope", "--db", db], "not_found"),
        (["keys", "revoke", "abc", "--tenant", "nobody", "--db", db], "not_found"),
        (["config", "--config", str(tmp_path / "missing.toml")], "configuration_error"),
        (["recall", "x", "--db", "ftp://example.org/x"], "configuration_error"),
        (["import", str(tmp_path / "none.jsonl"), "--db", db], "file_not_found"),
    ):
        result = runner.invoke(app, args)
        assert result.exit_code != 0, args
        assert result.stderr.startswith(f"{code}: "), (args, result.stderr)
        assert "Traceback" not in result.stderr + result.stdout
