"""`quipu reindex --corpus` on every backend (issue 28, DOC-1). A model change is a move: export
the store, import it into one opened with the new model (docs/configuration.md). The imported
corpora keep the old model's pin and vectors, so a search is refused (409
``corpus_model_mismatch``) until re-indexing re-embeds their served chunks with the current model
and re-pins them in one step; search then answers with the new model, and a second run has
nothing to do. The new model is a real second embedder (the OpenAI-compatible client against the
local bag-of-words server), not a renamed one."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from quipu import portability
from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.core.scopes import resolve_scope
from quipu.documents import DocumentService
from quipu.documents_reindex import reindex_corpora
from quipu.embeddings.local import LocalEmbedder
from quipu.embeddings.openai_compat import OpenAICompatEmbedder
from quipu.errors import Conflict
from quipu.memories import MemoryService
from quipu.storage.base import Store
from quipu.storage.sqlite.store import SQLiteStore
from quipu.surfaces.cli.app import app

IMPORTER = Principal("local", "local", Role.ADMIN, surface="cli")
PUMP = "The red valve of the pump must face upward before the hose is connected."
SHED = "The garden shed key hangs on the hook beside the back door."


def test_doc_001_reindex_corpus_moves_a_corpus_to_the_current_model(
    make_store: Any,
    local_embedder: LocalEmbedder,
    remote_embedder: OpenAICompatEmbedder,
    alice: Principal,
) -> None:
    old = DocumentService(MemoryService(make_store("old.db"), local_embedder, Limits()))
    pump = old.add(alice, PUMP, title="Pump")["document"]["id"]
    old.add(alice, SHED, title="Shed")
    old.add(alice, "A note about the pump valve.", title="Note", scope="user")
    store = make_store("new.db")
    moved = MemoryService(store, remote_embedder, Limits())
    portability.import_records(moved, IMPORTER, _export(old.store))
    new = DocumentService(moved)
    with pytest.raises(Conflict) as refused:
        new.search(alice, "which way does the valve face?")
    assert refused.value.code == "corpus_model_mismatch"

    seen: list[tuple[str, int, int]] = []
    report = reindex_corpora(
        new, progress=lambda ref, total, done: seen.append((ref.scope.value, total, done))
    )
    assert report == {
        "corpora": 2,
        "repinned": 2,
        "chunks": 3,
        "model": remote_embedder.model_id,
        "dimension": remote_embedder.dimension,
    }
    assert ("agent", 2, 2) in seen and ("user", 1, 1) in seen  # progress per corpus
    corpus = store.doc_corpus(resolve_scope(alice, "agent"))
    assert corpus is not None and corpus[0].model_id == remote_embedder.model_id
    hits = new.search(alice, "red valve pump")["results"]
    assert hits[0]["document_id"] == pump
    assert new.get(alice, pump).embedding_model == remote_embedder.model_id
    again = reindex_corpora(new)
    assert (again["repinned"], again["chunks"]) == (0, 0)
    assert reindex_corpora(new, every=True)["chunks"] == 3
    old.close()
    new.close()


def test_doc_001_the_reindex_corpus_command(
    tmp_path: Path,
    local_embedder: LocalEmbedder,
    remote_embedder: OpenAICompatEmbedder,
    alice: Principal,
) -> None:
    """The documented command, on a store whose corpus another model made: JSON summary,
    exit 0, and the corpus pinned to the bundled model after it."""
    source = SQLiteStore(tmp_path / "old.db")
    docs = DocumentService(MemoryService(source, remote_embedder, Limits()))
    docs.add(alice, PUMP, title="Pump")
    docs.close()
    db = tmp_path / "q.db"
    target = SQLiteStore(db)
    portability.import_records(
        MemoryService(target, local_embedder, Limits()), IMPORTER, _export(source)
    )
    source.close()
    target.close()
    result = CliRunner().invoke(app, ["reindex", "--corpus", "--json", "--db", str(db)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["corpora"], report["repinned"], report["chunks"]) == (1, 1, 1)
    assert report["model"] != remote_embedder.model_id
    store = SQLiteStore(db)
    corpus = store.doc_corpus(resolve_scope(alice, "agent"))
    store.close()
    assert corpus is not None and corpus[0].model_id == report["model"]


def _export(store: Store) -> list[str]:
    out = io.StringIO()
    portability.write_export(out, store, None)
    return out.getvalue().splitlines(keepends=True)
