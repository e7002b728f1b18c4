"""The embedder the settings name, built without loading its model, and where the bundled
model's rewritten copy is kept (issue 23).

Kept apart from the composition root so a process can start loading the model (on a
background thread, :func:`start_loading`) before it imports the rest of the server: ONNX
Runtime builds its session in native code, outside Python's interpreter lock, so the load
overlaps the imports instead of following them.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from quipu.embeddings.base import Embedder
from quipu.settings import Settings

log = logging.getLogger("quipu.embeddings")


def build_embedder(settings: Settings) -> Embedder | None:
    """The embedder ``settings.embedder`` names (None for ``none``); the model loads on first
    use, or now with :func:`start_loading`."""
    if settings.embedder == "none":
        return None
    if settings.embedder == "openai":
        from quipu.embeddings.openai_compat import OpenAICompatEmbedder

        assert settings.embedding_base_url and settings.embedding_model
        assert settings.embedding_dimension
        return OpenAICompatEmbedder(
            base_url=settings.embedding_base_url,
            model=settings.embedding_model,
            dimension=settings.embedding_dimension,
            api_key=settings.embedding_api_key,
            timeout=settings.embedding_timeout,
        )
    from quipu.embeddings.local import LocalEmbedder

    return LocalEmbedder(
        threads=settings.embedding_threads,
        cache_dir=model_cache(settings),
        batch_threads=settings.embedding_batch_threads,
    )


def model_cache(settings: Settings) -> Path | None:
    """Where the bundled embedder keeps its rewritten model: ``model_cache_dir`` when set,
    else one folder per user (:func:`user_cache_dir`), shared by every store on the machine."""
    if settings.model_cache_dir:
        return Path(settings.model_cache_dir)
    return user_cache_dir()


def user_cache_dir() -> Path | None:
    """``$XDG_CACHE_HOME/quipu``, else ``~/.cache/quipu``; None when neither can be named
    (no home folder): the model is then rewritten in every process."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if base and os.path.isabs(base):  # the XDG spec: a relative value is to be ignored
        return Path(base) / "quipu"
    try:
        return Path.home() / ".cache" / "quipu"
    except RuntimeError:  # no HOME and no passwd entry
        return None


def start_loading(embedder: Embedder | None) -> threading.Thread | None:
    """Load ``embedder``'s model on a daemon thread, if it has one to load (the bundled model).
    Callers need not wait: the first embedding waits for the load under way. A load that
    fails is left to fail again, with its error, on the first embedding."""
    load = getattr(embedder, "load", None)
    if load is None:
        return None

    def run() -> None:
        try:
            load()
        except Exception as exc:  # reported by the first embedding, which retries the load
            log.debug("loading the embedding model ahead of use failed: %s", exc)

    thread = threading.Thread(target=run, name="quipu-model-load", daemon=True)
    thread.start()
    return thread
