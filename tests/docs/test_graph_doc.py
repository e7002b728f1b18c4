"""docs/graph.md's example runs as pasted (issue 26) and prints what its comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "graph.md"


def test_graph_001_the_pasteable_example_runs_and_prints_its_comments(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1
    script = tmp_path / "example.py"
    script.write_text(blocks[0], encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == ["Anna has_brother Tom", "Anna lives_in Paris", "lives_in 2024-06-01"]
    assert "('Tom', 'works_at')" in lines[3]
