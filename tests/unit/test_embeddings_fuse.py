"""Bias folding and GELU fusion on the bundled model (quipu.embeddings.fuse), on the real file."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from quipu.embeddings.attention import fuse_attention_in
from quipu.embeddings.fuse import fold_bias_in, fuse_gelu_in
from quipu.embeddings.quantize import rewrite_int8
from tests.support.bundled_model import SENTENCES, model_bytes, pooled, token_ids


@pytest.fixture
def model() -> onnx.ModelProto:
    loaded = onnx.load_from_string(model_bytes())
    rewrite_int8(loaded)
    fuse_attention_in(loaded)
    return loaded


def test_every_projection_bias_and_gelu_is_folded(model: onnx.ModelProto) -> None:
    adds_before = [n.op_type for n in model.graph.node].count("Add")
    assert fold_bias_in(model) == 36  # 6 layers x (q, k, v, attention out, intermediate, out)
    assert fuse_gelu_in(model) == 6
    ops = [node.op_type for node in model.graph.node]
    assert ops.count("DynamicQuantizeMatMul") == 36
    assert all(len(n.input) == 5 for n in model.graph.node if n.op_type == "DynamicQuantizeMatMul")
    assert ops.count("Gelu") == 6 and "Erf" not in ops and "Div" not in ops
    # left: the embeddings' two adds, the two residual adds per layer
    assert ops.count("Add") == adds_before - 36 - 6 == 2 + 12


def test_the_folded_model_computes_the_same_vectors(model: onnx.ModelProto) -> None:
    before = model.SerializeToString()
    fold_bias_in(model)
    fuse_gelu_in(model)
    after = model.SerializeToString()
    for text in [*SENTENCES, ""]:
        ids = token_ids(text)
        assert float(pooled(before, ids) @ pooled(after, ids)) > 0.999


def test_graphs_without_the_patterns_are_left_alone() -> None:
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["y"]),
            helper.make_node("Add", ["y", "b"], ["z"]),
            helper.make_node("Div", ["z", "two"], ["out"]),
        ],
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 2])],
        [
            helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1.0, 0.0, 0.0, 1.0]),
            helper.make_tensor("b", TensorProto.FLOAT, [2], [1.0, 1.0]),
            helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
        ],
    )
    plain = helper.make_model(graph)
    before = plain.SerializeToString()
    assert fold_bias_in(plain) == 0 and fuse_gelu_in(plain) == 0
    assert plain.SerializeToString() == before
