"""docs/graph.md's placement example (issue 26, GRAPH-2) runs as pasted and prints what its
comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "graph.md"


def test_graph_2_the_placement_example_runs_and_prints_its_comments(tmp_path: Path) -> None:
    blocks = re.findall(r"```py\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    [block] = [b for b in blocks if "graph_placement(" in b]
    script = tmp_path / "placement.py"
    script.write_text(block, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    said = [c.strip() for c in re.findall(r"#(.*)$", block, flags=re.M)]
    assert done.stdout.splitlines() == said
