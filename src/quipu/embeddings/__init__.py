"""Embedders: the :class:`Embedder` seam, the bundled local model, an OpenAI-compatible client."""

from quipu.embeddings.base import Embedder
from quipu.embeddings.local import LocalEmbedder
from quipu.embeddings.openai_compat import OpenAICompatEmbedder

__all__ = ["Embedder", "LocalEmbedder", "OpenAICompatEmbedder"]
