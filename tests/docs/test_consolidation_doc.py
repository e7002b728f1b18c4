"""docs/consolidation.md shows a newcomer the index of a sample conversation (issue 24): its
example runs as written and prints what the page shows, memory ids and dates aside."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "consolidation.md"


def _normalised(text: str) -> str:
    text = re.sub(r"[0-9a-f]{32}", "<id>", text)
    return re.sub(r"\d{4}-\d{2}-\d{2}", "<date>", text).strip()


def test_consol_1_sample_conversation_prints_the_index_shown(tmp_path: Path) -> None:
    page = DOC.read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", page, flags=re.S)
    shown = re.search(r"It prints:\n\n```text\n(.*?)```", page, flags=re.S)
    assert code is not None and shown is not None
    done = subprocess.run(
        [sys.executable, "-c", code.group(1)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert _normalised(done.stdout) == _normalised(shown.group(1))
