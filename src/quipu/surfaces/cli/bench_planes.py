"""`quipu bench documents` and `quipu bench documents-scale`: the documents plane's benchmarks
(issue 28, DOC-1), registered on the bench command group."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.status import Status

from quipu.surfaces.cli.bench import Data, Out, _dataset, _emit, _reporter, app, console
from quipu.surfaces.cli.options import Output

# --------------------------------------------------------------------------------------
# The documents plane (issue 28, DOC-1): quipu.evals.documents_bench
# --------------------------------------------------------------------------------------


@app.command()
def documents(
    data: Data = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Scored questions.")] = 20,
    out: Out = None,
) -> None:
    """LongMemEval haystacks written as documents (one per session) and as memories (one per
    turn) in one store: evidence any@k/all@k, tokens read per query, ingest and latency, per
    plane, on the same questions."""
    from quipu.core.limits import Limits
    from quipu.embeddings.local import LocalEmbedder
    from quipu.evals import documents_bench, public_bench
    from quipu.memories import MemoryService
    from quipu.storage.sqlite.store import SQLiteStore

    path = _dataset(data, "longmemeval")
    haystacks = public_bench.longmemeval_haystacks(path, limit)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "docs.db")
        service = MemoryService(store, LocalEmbedder(), Limits())
        with console.status("documents bench") as status:
            result = documents_bench.evidence(
                service, haystacks, progress=_reporter(status, "questions", len(haystacks))
            )
        service.close()
        store.close()
    _emit("documents", {"data": str(path), "limit": limit, **result}, out)


@app.command("documents-scale")
def documents_scale(
    chunks: Annotated[int, typer.Option("-n", help="Chunks in the corpus.")] = 10_000,
    per_document: Annotated[int, typer.Option(help="Chunks per document (one add each).")] = 500,
    queries: Annotated[int, typer.Option(help="Timed searches.")] = 100,
    large_chars: Annotated[
        int,
        typer.Option(
            min=0,
            max=1_000_000,
            help="Then add one document of this many characters in one call (0: none).",
        ),
    ] = 0,
    database: Annotated[
        str | None,
        typer.Option(help="An empty postgresql:// database instead of a temporary SQLite file."),
    ] = None,
    out: Out = None,
) -> None:
    """Ingest N chunks of generated text as documents into one corpus (and, with
    --large-chars, one large document in one call) and time search over it: chunks/s, search
    p50/p95 and the machine's load average."""
    from quipu.composition import build_store, load_settings
    from quipu.embeddings.local import LocalEmbedder
    from quipu.evals import documents_bench

    with tempfile.TemporaryDirectory() as tmp:
        target = database or str(Path(tmp) / "docs.db")
        store = build_store(load_settings({"database": target}, environ={}))
        try:
            with console.status("documents scale") as status:
                result = documents_bench.scale(
                    LocalEmbedder(),
                    store,
                    chunks,
                    per_document=per_document,
                    queries=queries,
                    progress=_reporter(status, "chunks", chunks),
                    large_chars=large_chars,
                )
        finally:
            store.close()
    _emit("documents-scale", result, out)


# --------------------------------------------------------------------------------------
# The knowledge plane (issue 25): quipu.evals.knowledge_bench
# --------------------------------------------------------------------------------------


@app.command()
def knowledge(
    data: Data = None,
    conversations: Annotated[
        int, typer.Option("--conversations", min=1, help="LoCoMo conversations to load.")
    ] = 2,
    skip: Annotated[
        int, typer.Option("--skip", min=0, help="Conversations to leave out first (held out).")
    ] = 0,
    k: Annotated[int, typer.Option("--k", min=1, max=100, help="Rows per question.")] = 10,
    out: Out = None,
) -> None:
    """Merged recall against per-scope recall on LoCoMo split across three memory scopes and
    the knowledge plane (issue 25): evidence recall, tokens per query, determinism, latency."""
    from quipu.embeddings.local import LocalEmbedder
    from quipu.evals import knowledge_bench

    path = _dataset(data, "locomo")
    with Status("knowledge scenario", console=Output(stderr=True)):
        result = knowledge_bench.run(
            path, LocalEmbedder(), conversations=conversations, skip=skip, k=k
        )
    _emit("knowledge", result, out)
