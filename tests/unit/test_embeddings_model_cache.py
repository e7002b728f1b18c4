"""The rewritten model kept for the next process (issue 23, finding 3: ``import onnx`` and the
rewrite were most of a cold start): a later process loads it without importing ``onnx``, gets
the same vectors, and never uses a file that is not exactly the pinned rewrite."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from quipu.composition import build_service, local_principal
from quipu.embeddings import local
from quipu.embeddings.local import LocalEmbedder
from quipu.embeddings.select import model_cache
from quipu.settings import Settings

PROBE = "Dana prefers window seats"


def _cached(folder: Path) -> Path:
    (found,) = folder.glob("*.onnx")
    return found


def test_issue23_the_rewrite_hashes_to_the_pinned_value(local_embedder: LocalEmbedder) -> None:
    raw = local._read_verified(
        local_embedder._resolve_model_path(), local.MODEL_SHA256, what="model"
    )
    assert hashlib.sha256(local.rewrite(raw)).hexdigest() == local.REWRITTEN_SHA256


def test_issue23_a_second_process_loads_the_kept_model_without_onnx(tmp_path: Path) -> None:
    first = LocalEmbedder(cache_dir=tmp_path)
    expected = first.embed_query(PROBE)
    assert hashlib.sha256(_cached(tmp_path).read_bytes()).hexdigest() == local.REWRITTEN_SHA256
    script = (
        "import json, sys\n"
        "from quipu.embeddings.local import LocalEmbedder\n"
        "vector = LocalEmbedder(cache_dir=sys.argv[1]).embed_query(sys.argv[2])\n"
        "print(json.dumps({'onnx': 'onnx' in sys.modules, 'vector': vector.tolist()}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path), PROBE],
        capture_output=True,
        text=True,
        check=True,
    )
    seen = json.loads(done.stdout)
    assert seen["onnx"] is False
    assert np.array_equal(np.asarray(seen["vector"], dtype=np.float32), expected)


def test_issue23_an_altered_kept_model_is_not_used(tmp_path: Path) -> None:
    LocalEmbedder(cache_dir=tmp_path).load()
    kept = _cached(tmp_path)
    kept.write_bytes(kept.read_bytes()[:-64] + b"\0" * 64)
    again = LocalEmbedder(cache_dir=tmp_path)
    vector = again.embed_query(PROBE)
    assert np.array_equal(vector, LocalEmbedder().embed_query(PROBE))
    assert hashlib.sha256(kept.read_bytes()).hexdigest() == local.REWRITTEN_SHA256  # rewritten


def test_issue23_one_kept_model_per_user_not_per_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two SQLite stores opened at defaults keep one rewritten model, in the user's cache
    (``$XDG_CACHE_HOME/quipu``), not a 23 MB copy in each ``<database>-index/`` folder; an
    explicit ``model_cache_dir`` still wins."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for name in ("a.db", "b.db"):
        settings = Settings(database=str(tmp_path / name))
        service = build_service(settings)
        try:
            service.remember(local_principal(settings), f"Dana prefers window seats ({name})")
            service.recall(local_principal(settings), "where does Dana sit?")
        finally:
            service.store.close()
        assert not list((tmp_path / f"{name}-index").glob("*.onnx"))
    assert hashlib.sha256(_cached(tmp_path / "xdg" / "quipu").read_bytes()).hexdigest() == (
        local.REWRITTEN_SHA256
    )
    chosen = Settings(database=str(tmp_path / "a.db"), model_cache_dir=str(tmp_path / "mine"))
    assert model_cache(chosen) == tmp_path / "mine"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # ignored, as the XDG spec says
    assert model_cache(Settings(database=str(tmp_path / "a.db"))) == (
        Path.home() / ".cache" / "quipu"
    )
