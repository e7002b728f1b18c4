"""Default threading (issue 23 finding 4), measured in docs/benchmarks.md: numpy's BLAS runs
one thread per process once a store opens (a 10k-row scope scan took 32 ms on two threads and
1.1 ms on one on a busy 2-core machine), and the local model embeds writes on one thread
(ingest 2.1x faster than one thread per core under the same load)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from quipu.composition import load_settings
from quipu.embeddings.select import build_embedder

_PROBE = """
import json, sys
from threadpoolctl import ThreadpoolController, threadpool_limits
threadpool_limits(limits=3, user_api="blas")  # BLAS as it starts on a multi-core machine
import quipu
mem = quipu.open(sys.argv[1], embedder="none", worker_embedded=False, **json.loads(sys.argv[2]))
blas = [i["num_threads"] for i in ThreadpoolController().info() if i["user_api"] == "blas"]
mem.close()
print(json.dumps(blas))
"""


def _blas_threads_after_open(path: Path, settings: dict[str, object]) -> list[int]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(path), json.dumps(settings)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    found: list[int] = json.loads(done.stdout)
    return found


def test_issue23_opening_a_store_limits_blas_to_one_thread(tmp_path: Path) -> None:
    assert _blas_threads_after_open(tmp_path / "a.db", {}) == [1]
    assert _blas_threads_after_open(tmp_path / "b.db", {"blas_threads": 2}) == [2]


def test_issue23_local_model_embeds_writes_on_one_thread_by_default() -> None:
    settings = load_settings({}, environ={})
    assert settings.embedding_threads == 1
    embedder = build_embedder(settings)
    assert getattr(embedder, "_threads", None) == 1
