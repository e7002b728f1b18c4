"""The attention fusion of the bundled model (quipu.embeddings.attention), on the real file."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from quipu.embeddings.attention import fuse_attention
from quipu.embeddings.quantize import dynamic_int8
from tests.support.bundled_model import SENTENCES, model_bytes, pooled, token_ids


@pytest.fixture(scope="module")
def int8_model() -> bytes:
    return dynamic_int8(model_bytes())[0]


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
    fused, _ = fuse_attention(int8_model)
    for text in [*SENTENCES, ""]:
        ids = token_ids(text)
        # Float sums change order, and 8-bit activations then round a little differently.
        assert float(pooled(int8_model, ids) @ pooled(fused, ids)) > 0.99


def test_a_model_without_attention_comes_back_unchanged() -> None:
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["y"])],
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
    )
    plain = helper.make_model(graph).SerializeToString()
    assert fuse_attention(plain) == (plain, 0)
