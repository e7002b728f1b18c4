"""The README's shell blocks run as written (issue 27; as sqlite-utils tests its docs): every
```console block, its `$ ` lines joined into one bash script per block, run in order in one
fresh folder that has the project's `.venv`, each block ending with status 0.

One substitution: the default port (8750) becomes a free one, so the test never collides with
a server already running on this machine."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def console_blocks(text: str) -> list[list[str]]:
    """The commands of each ```console block: `$ ` lines, with `\\` continuations joined."""
    blocks = []
    for body in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        commands: list[str] = []
        pending: str | None = None
        for line in body.splitlines():
            if pending is not None:
                pending += "\n" + line
                if not line.rstrip().endswith("\\"):
                    commands.append(pending)
                    pending = None
            elif line.startswith("$ "):
                command = line[2:]
                if command.rstrip().endswith("\\"):
                    pending = command
                else:
                    commands.append(command)
        blocks.append(commands)
    return blocks


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_readme_shell_blocks_run_as_written(tmp_path: Path) -> None:
    blocks = console_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 3 and all(blocks)
    venv = Path(sys.executable).parent.parent
    (tmp_path / ".venv").symlink_to(venv)
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("QUIPU_")},
        "QUIPU_PORT": str(port),
        "QUIPU_WORKERS": "1",  # one process: the test machine has two cores for everything
        "QUIPU_LOG_LEVEL": "warning",
    }
    outputs = []
    for commands in blocks:
        script = "\n".join(
            [
                "set -euo pipefail",
                "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT",
                *(c.replace("localhost:8750", f"localhost:{port}") for c in commands),
            ]
        )
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, (commands, done.stdout, done.stderr)
        assert "Traceback" not in done.stdout + done.stderr, done.stderr
        outputs.append(done.stdout)
    tour, http, tenants = outputs[:3]
    assert "aisle" in tour and "revises" in tour  # history shows the revision
    assert '"status":"ready"' in http and "Dana prefers aisle seats now" in http
    assert '"token":"qt_' in tenants and "ran " in tenants
