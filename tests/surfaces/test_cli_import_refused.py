"""`quipu import` leaves out what it refuses and imports the rest (OPS-2, SAFE-1): each refused
record is reported by line with its code, the summary counts them per reason, and the exit code
is 1; a second run adds nothing."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from quipu.surfaces.cli.app import app

runner = CliRunner()
TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def _export_with_bad_rows(tmp_path: Path) -> Path:
    source = str(tmp_path / "a.db")
    for text in ("Dana prefers window seats", "The standup is at 9"):
        assert runner.invoke(app, ["remember", text, "--db", source]).exit_code == 0
    out = tmp_path / "export.jsonl"
    assert runner.invoke(app, ["export", "--db", source, "--out", str(out)]).exit_code == 0
    lines = out.read_text().splitlines()
    version = json.loads(next(line for line in lines if '"type": "version"' in line))
    leaked = {**version, "id": "f" * 32, "text": f"the deploy token is {TOKEN}"}
    lines[2:2] = [json.dumps(leaked), "{not json", json.dumps({"type": "galaxy"})]
    out.write_text("\n".join(lines) + "\n")
    return out


def test_ops_002_import_skips_refused_rows_reports_them_by_line_and_exits_1(
    tmp_path: Path,
) -> None:
    export = _export_with_bad_rows(tmp_path)
    target = str(tmp_path / "b.db")
    result = runner.invoke(app, ["import", str(export), "--db", target, "--json"])
    assert result.exit_code == 1, result.output
    summary = json.loads(result.stdout)
    assert summary["imported"]["version"] == 2
    assert summary["refused"] == {
        "count": 3,
        "by_reason": {"invalid_export": 2, "secret_detected": 1},
    }
    for line in (3, 4, 5):
        assert f"line {line} " in result.stderr
    assert TOKEN not in result.output
    listed = runner.invoke(app, ["list", "--db", target, "--json"])
    texts = sorted(m["text"] for m in json.loads(listed.stdout)["items"])
    assert texts == ["Dana prefers window seats", "The standup is at 9"]
    again = runner.invoke(app, ["import", str(export), "--db", target, "--json"])
    assert again.exit_code == 1 and json.loads(again.stdout)["imported"].get("version", 0) == 0


def test_ops_002_a_clean_import_exits_0_without_a_refused_section(tmp_path: Path) -> None:
    source = str(tmp_path / "a.db")
    assert (
        runner.invoke(app, ["remember", "Dana prefers window seats", "--db", source]).exit_code == 0
    )
    out = tmp_path / "export.jsonl"
    assert runner.invoke(app, ["export", "--db", source, "--out", str(out)]).exit_code == 0
    result = runner.invoke(app, ["import", str(out), "--db", str(tmp_path / "b.db"), "--json"])
    assert result.exit_code == 0 and "refused" not in json.loads(result.stdout)
