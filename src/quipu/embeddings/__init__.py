"""Embedders: the :class:`Embedder` seam, the bundled local model, an OpenAI-compatible client.

The backends are imported when first named (PEP 562): importing the seam
(``quipu.embeddings.base``) must not load ONNX, which takes seconds."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quipu.embeddings.base import Embedder
    from quipu.embeddings.local import LocalEmbedder
    from quipu.embeddings.openai_compat import OpenAICompatEmbedder

__all__ = ["Embedder", "LocalEmbedder", "OpenAICompatEmbedder"]

_HOMES = {
    "Embedder": "quipu.embeddings.base",
    "LocalEmbedder": "quipu.embeddings.local",
    "OpenAICompatEmbedder": "quipu.embeddings.openai_compat",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'quipu.embeddings' has no attribute {name!r}")
    return getattr(import_module(home), name)
