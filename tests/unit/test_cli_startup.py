"""`quipu --help` stays cheap (issue 27: 3.7 s, because every command imported ONNX, ml_dtypes
and FastAPI). The time is measured by scripts/cli_startup.py, never asserted here; what is
asserted is the cause: which modules a `--help` loads. (pydantic is not in the list: typer
itself imports it to parse a command's options.)"""

from __future__ import annotations

import json
import subprocess
import sys

from quipu.evals import retrieval_eval, synthetic
from quipu.surfaces.cli import eval as eval_cli

HEAVY = (
    "onnx",
    "onnxruntime",
    "ml_dtypes",
    "numpy",
    "fastapi",
    "httpx",
    "mcp",
    "psycopg",
    "prometheus_client",
    "quipu.composition",
    "quipu.memories",
    "quipu.settings",
    "quipu.storage.base",
)

PROBE = """
import json, sys
from typer.testing import CliRunner
from quipu.surfaces.cli.app import app
for args in (["--help"], ["recall", "--help"], ["bench", "--help"], ["export", "--help"]):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (args, result.output)
print(json.dumps(sorted(sys.modules)))
"""


def test_help_imports_no_heavy_module() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(done.stdout))
    heavy = sorted(m for m in loaded if m in HEAVY or m.startswith(tuple(h + "." for h in HEAVY)))
    assert heavy == []


def test_the_cli_defaults_named_for_speed_match_their_modules() -> None:
    assert eval_cli.DEFAULT_CONVERSATIONS == synthetic.DEFAULT_CONVERSATIONS
    assert eval_cli.RETRIEVAL_K == retrieval_eval.DEFAULT_K
