"""A library script that never calls ``close()`` exits cleanly (issue 23 finding: one exit in
six aborted with "terminate called without an active exception", status 134, when a background
thread was still inside ONNX Runtime as the interpreter tore it down). ``quipu.open`` closes the
client at exit, so its threads have stopped before the native libraries go."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import atexit, sys, threading
import quipu

def probe():  # registered before open: runs after the client's own exit handler
    alive = sorted(t.name for t in threading.enumerate() if t.name.startswith("quipu-"))
    print("alive", alive)

atexit.register(probe)
mem = quipu.open(sys.argv[1])
mem.remember("Anna lives in Berlin.")
mem.recall("Where does Anna live?")
print("threads", sorted(t.name for t in threading.enumerate() if t.name.startswith("quipu-")))
"""


def test_ops_library_exit_without_close_stops_the_clients_threads(tmp_path: Path) -> None:
    script = tmp_path / "forgetful.py"
    script.write_text(SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "m.db")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["threads"] != "[]"  # the client had background threads running
    assert lines["alive"] == "[]", done.stdout  # none left when the interpreter tears down
