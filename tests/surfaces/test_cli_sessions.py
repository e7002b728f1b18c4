"""`quipu sessions append|history|promote` (issue 24, MEM-2): a turn appended from the shell
with the time it was said, read back, and promoted into dated memories, on a real SQLite file;
a bad time is refused with its stable code and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quipu.surfaces.cli.app import app

runner = CliRunner()
SAID = "2023-05-20T14:30:00+00:00"


def test_mem_002_append_a_dated_turn_from_the_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24: only the library, HTTP and MCP could give a turn its real time."""
    monkeypatch.setenv("QUIPU_WORKER_EMBEDDED", "false")
    db = str(tmp_path / "s.db")
    said = runner.invoke(
        app, ["sessions", "append", "s1", "user", "I adopted a dog named Biscuit yesterday.",
              "--observed-at", SAID, "--metadata", '{"source": "import"}', "--db", db]
    )  # fmt: skip
    assert said.exit_code == 0, said.output
    turn = json.loads(said.stdout)
    assert (turn["seq"], turn["observed_at"], turn["metadata"]) == (1, SAID, {"source": "import"})
    reply = ["sessions", "append", "s1", "assistant", "Congratulations on Biscuit!", "--db", db]
    assert runner.invoke(app, reply).exit_code == 0
    for bad in (["--observed-at", "yesterday"], ["--metadata", "{not json"]):
        refused = runner.invoke(
            app, ["sessions", "append", "s1", "user", "x y z", *bad, "--db", db]
        )
        assert refused.exit_code == 1
        assert "invalid_time" in refused.output or "invalid_argument" in refused.output
    read = json.loads(runner.invoke(app, ["sessions", "history", "s1", "--db", db]).stdout)
    assert [t["seq"] for t in read] == [1, 2] and read[0]["observed_at"] == SAID
    job = json.loads(runner.invoke(app, ["sessions", "promote", "s1", "--db", db]).stdout)
    assert job["kind"] == "promote_session" and job["status"] == "queued"
    assert runner.invoke(app, ["worker", "--once", "--db", db]).exit_code == 0
    listed = runner.invoke(app, ["list", "--scope", "agent_user", "--json", "--db", db])
    facts = [m for m in json.loads(listed.stdout)["items"] if m["kind"] != "episode"]
    biscuit = [m for m in facts if "Biscuit" in m["text"]]
    assert biscuit and biscuit[0]["observed_at"] == SAID
    assert "2023-05-19" in biscuit[0]["text"]  # "yesterday" of the turn, not of the append
