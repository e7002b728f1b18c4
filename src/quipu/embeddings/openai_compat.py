"""An embedder over any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

``base_url`` follows the OpenAI client convention and includes the version prefix, e.g.
``https://api.openai.com/v1`` or ``http://127.0.0.1:11434/v1``. Answers are checked strictly
(one vector per text, the declared dimension, finite numbers only) and every failure, from
a refused connection to a malformed body, becomes :class:`~quipu.errors.EmbeddingUnavailable`.
The API key is sent as a bearer token and never appears in an error message.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from quipu.embeddings.base import Embedder, Vectors, check_texts, normalise_rows
from quipu.errors import EmbeddingUnavailable

DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_BATCH_SIZE = 64
_BODY_EXCERPT_CHARS = 200


class OpenAICompatEmbedder(Embedder):
    """Embeds through a hosted or local OpenAI-compatible embeddings endpoint.

    ``dimension`` is what the model is declared to return; an answer of any other length is
    refused. ``timeout`` (seconds) bounds connecting, sending and each wait for data;
    ``batch_size`` is how many texts go in one request. The HTTP client is shared and
    thread-safe; :meth:`close` releases its connections.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        dimension: int,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required")
        if not model:
            raise ValueError("model is required")
        if dimension < 1:
            raise ValueError(f"dimension must be at least 1, got {dimension}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.model_id = f"openai-compat:{model}"
        self.dimension = dimension
        self._model = model
        self._url = base_url.rstrip("/") + "/embeddings"
        self._api_key = api_key or None
        self._timeout = timeout
        self._batch_size = batch_size
        headers = {"Accept": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key}"
        # trust_env=False: proxies and certificates come from Quipu's settings, not from
        # whatever environment the process happens to run in.
        self._client = httpx.Client(headers=headers, timeout=timeout, trust_env=False)

    def close(self) -> None:
        """Close the HTTP connections. The embedder cannot be used afterwards."""
        self._client.close()

    def __enter__(self) -> OpenAICompatEmbedder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        items = check_texts(texts)
        if not items:
            return np.empty((0, self.dimension), dtype=np.float32)
        rows: list[list[float]] = []
        for start in range(0, len(items), self._batch_size):
            rows.extend(self._request(items[start : start + self._batch_size]))
        matrix = np.asarray(rows, dtype=np.float64)
        return normalise_rows(matrix, count=len(items), dimension=self.dimension)

    def _request(self, batch: list[str]) -> list[list[float]]:
        body = {"model": self._model, "input": batch, "encoding_format": "float"}
        try:
            response = self._client.post(self._url, json=body)
        except httpx.TimeoutException as exc:
            raise self._unavailable(
                f"timed out after {self._timeout:g}s ({type(exc).__name__})"
            ) from exc
        except httpx.HTTPError as exc:
            raise self._unavailable(f"request failed: {self._redact(str(exc))}") from exc
        if response.status_code != httpx.codes.OK:
            excerpt = self._redact(response.text[:_BODY_EXCERPT_CHARS])
            raise self._unavailable(
                f"HTTP {response.status_code}: {excerpt}", status=response.status_code
            )
        try:
            payload = response.json()
        except ValueError as exc:
            raise self._unavailable("response is not valid JSON") from exc
        return self._vectors_from(payload, expected=len(batch))

    def _vectors_from(self, payload: Any, *, expected: int) -> list[list[float]]:
        """The vectors of one answer, in input order, or ``EmbeddingUnavailable``."""
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise self._unavailable("response has no 'data' list")
        if len(data) != expected:
            raise self._unavailable(f"response holds {len(data)} embeddings for {expected} texts")
        by_index: dict[int, list[float]] = {}
        for position, item in enumerate(data):
            if not isinstance(item, dict):
                raise self._unavailable(f"data[{position}] is not an object")
            index = item.get("index", position)
            if type(index) is not int or not 0 <= index < expected or index in by_index:
                raise self._unavailable(f"data[{position}] has a bad or repeated index {index!r}")
            by_index[index] = self._checked_vector(item.get("embedding"), position)
        return [by_index[index] for index in range(expected)]

    def _checked_vector(self, embedding: Any, position: int) -> list[float]:
        if not isinstance(embedding, list):
            raise self._unavailable(f"data[{position}].embedding is not a list of numbers")
        if len(embedding) != self.dimension:
            raise self._unavailable(
                f"data[{position}].embedding has {len(embedding)} dimensions, "
                f"expected {self.dimension}"
            )
        for value in embedding:
            # bool is an int subclass and JSON true is not a coordinate.
            if type(value) not in (int, float) or not math.isfinite(value):
                raise self._unavailable(
                    f"data[{position}].embedding holds a non-numeric or non-finite value"
                )
        return embedding

    def _unavailable(self, reason: str, *, status: int | None = None) -> EmbeddingUnavailable:
        details: dict[str, Any] = {"model": self._model, "url": self._url}
        if status is not None:
            details["status"] = status
        return EmbeddingUnavailable(f"embedding endpoint {self._url}: {reason}", details=details)

    def _redact(self, text: str) -> str:
        if self._api_key:
            return text.replace(self._api_key, "[redacted]")
        return text
