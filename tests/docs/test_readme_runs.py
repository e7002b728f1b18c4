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


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_python_blocks_run_alone_and_in_order(tmp_path: Path) -> None:
    """Each ```python block runs by itself in a fresh folder, and all of them one after the
    other in one interpreter (a newcomer pastes them either way)."""
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 2
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUIPU_")}
    scripts = [*([b] for b in blocks), blocks]
    for n, parts in enumerate(scripts):
        folder = tmp_path / f"run-{n}"
        folder.mkdir()
        done = subprocess.run(
            [sys.executable, "-c", "\n".join(parts)],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, (n, done.stdout, done.stderr)
    assert "Lisbon" in done.stdout  # the in-order run found what promotion wrote


def test_a_call_on_a_closed_client_is_a_quipu_error(tmp_path: Path) -> None:
    import quipu

    mem = quipu.open(tmp_path / "closed.db")
    mem.remember("Dana prefers window seats")
    mem.close()
    for call in (
        lambda: mem.recall("Dana"),
        lambda: mem.remember("another fact"),
        mem.list,
    ):
        try:
            call()
        except quipu.Closed as exc:
            assert exc.code == "client_closed"
        else:
            raise AssertionError("a call on a closed client went through")
