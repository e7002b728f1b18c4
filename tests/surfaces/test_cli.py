"""The `quipu` CLI against a local file (API-4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quipu.surfaces.cli.app import app

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout


def test_api_004_memory_verbs_round_trip(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    code, out = run(
        "remember",
        "Dana prefers window seats",
        "--db",
        db,
        "--kind",
        "preference",
        "--tag",
        "travel",
        "--json",
    )
    assert code == 0, out
    mid = json.loads(out)["memory"]["id"]
    code, out = run("recall", "where does Dana sit?", "--db", db, "--json")
    assert code == 0 and json.loads(out)["results"][0]["memory"]["id"] == mid
    code, out = run(
        "revise", mid, "Dana prefers aisle seats", "--db", db, "--expected-version", "1", "--json"
    )
    assert code == 0 and json.loads(out)["version"] == 2
    code, out = run("get", mid, "--db", db, "--json")
    assert json.loads(out)["text"] == "Dana prefers aisle seats"
    code, out = run("list", "--db", db, "--json")
    assert [m["id"] for m in json.loads(out)["items"]] == [mid]
    code, out = run("forget", mid, "--db", db, "--reason", "test", "--json")
    assert code == 0 and json.loads(out)["status"] == "unavailable"
    code, out = run("history", mid, "--db", db, "--json")
    assert [v["version"] for v in json.loads(out)["versions"]] == [1, 2, 3]
    # human-readable output renders too
    code, out = run("history", mid, "--db", db)
    assert code == 0 and "unavailable" in out


def test_api_004_errors_exit_nonzero_with_the_code(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    result = runner.invoke(app, ["recall", "   ", "--db", db])
    assert result.exit_code == 1 and "invalid_query" in result.stderr
    result = runner.invoke(app, ["get", "missing", "--db", db])
    assert result.exit_code == 1 and "not_found" in result.stderr
    result = runner.invoke(
        app, ["remember", "token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "--db", db]
    )
    assert result.exit_code == 1 and "secret_detected" in result.stderr


def test_api_004_export_import_via_cli(tmp_path: Path) -> None:
    a, b, out = str(tmp_path / "a.db"), str(tmp_path / "b.db"), str(tmp_path / "x.jsonl")
    run("remember", "one fact", "--db", a)
    run("remember", "another fact", "--db", a)
    code, _ = run("export", "--db", a, "--out", out)
    assert code == 0 and len(Path(out).read_text().splitlines()) == 3
    code, text = run("import", out, "--db", b)
    assert code == 0 and "imported 2" in text
    code, listed = run("list", "--db", b, "--json")
    assert sorted(m["text"] for m in json.loads(listed)["items"]) == ["another fact", "one fact"]


def test_scope_serve_refuses_non_loopback(tmp_path: Path) -> None:
    result = runner.invoke(app, ["serve", "--db", str(tmp_path / "s.db"), "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "refusing to bind" in result.stderr


def test_api_005_bad_settings_are_a_clear_message(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["recall", "x", "--db", str(tmp_path / "s.db")], env={"QUIPU_MAX_K": "zero"}
    )
    assert result.exit_code == 2 and "max_k" in result.stderr


def test_api_005_config_lists_every_setting() -> None:
    code, out = run("config", "--json")
    assert code == 0
    names = {row["setting"] for row in json.loads(out)}
    from quipu.settings import Settings

    assert names == set(Settings.model_fields)


def test_life_001_status_verb_moves_a_memory(tmp_path: Path) -> None:
    """`quipu status ID STATUS` (added with issue 20 defect 15's server verbs) on a file."""
    db = str(tmp_path / "status.db")
    code, out = run("remember", "the vault code changes monthly", "--db", db, "--json")
    mid = json.loads(out)["memory"]["id"]
    code, out = run("status", mid, "quarantined", "--db", db, "--reason", "check", "--json")
    assert code == 0 and json.loads(out)["status"] == "quarantined"
    code, out = run("list", "--db", db, "--json")
    assert json.loads(out)["items"] == []  # quarantined rows are not listed
    # leaving quarantine is a review by someone who did not write it (LIFE-6, issue 22)
    result = runner.invoke(
        app, ["status", mid, "active", "--db", db, "--expected-version", "2", "--reason", "ok"]
    )
    assert result.exit_code == 1 and "self_review" in result.stderr
    code, out = run(
        "review", "decide", mid, "activate", "--db", db, "--expected-version", "2",
        "--reason", "reviewed", "--reviewer", "dana",
    )  # fmt: skip
    assert code == 0 and "active" in out
    result = runner.invoke(app, ["status", mid, "candidate", "--db", db])
    assert result.exit_code == 1 and "illegal_transition" in result.stderr


def test_api_004_a_file_name_with_a_colon_is_written_with_a_dot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _ = run("remember", "colons are fine in paths", "--db", "./notes:v2.db")
    assert code == 0 and (tmp_path / "notes:v2.db").exists()
    result = runner.invoke(app, ["remember", "x", "--db", "notes:v2.db"])
    assert result.exit_code == 2 and "./NAME" in " ".join(result.stderr.split())
