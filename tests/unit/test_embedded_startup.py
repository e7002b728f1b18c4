"""What the embedded client's import leaves out (issue 23, finding 3: ``import quipu`` took
1.4-2.3 s with onnx, ml_dtypes and the HTTP stack): a process that opens a store to recall
loads none of the server, MCP, HTTP-client, ONNX or extractor modules at import."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "fastapi",
    "uvicorn",
    "mcp",
    "httpx",
    "onnx",
    "onnxruntime",
    "ml_dtypes",
    "quipu.extraction.deterministic",
    "quipu.extraction.model",
    "quipu.transfer",
)


def test_issue23_importing_the_embedded_client_loads_no_heavy_module() -> None:
    script = (
        "import json, sys\n"
        "import quipu\n"
        "from quipu.embedded import open\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == []
