"""docs/graph.md's multi-hop example (issue 26, ``graph_weight``) runs as pasted and prints
what its comment says: the memory linked only through an entity is recalled."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "graph.md"


def test_graph_weight_example_recalls_the_memory_linked_through_an_entity(
    tmp_path: Path,
) -> None:
    found = re.findall(r"```py\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    blocks = [b for b in found if "graph_weight=" in b]
    assert len(blocks) == 1
    script = tmp_path / "hops.py"
    script.write_text(blocks[0], encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3
    assert any("Kestrel moves" in line and "'graph'" in line for line in lines), lines
