"""The int8 rewrite of the bundled model (quipu.embeddings.quantize), on the real model file."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from quipu.embeddings.quantize import dynamic_int8
from tests.support.bundled_model import SENTENCES, model_bytes, pooled, token_ids


@pytest.fixture(scope="module")
def bundled() -> bytes:
    return model_bytes()


def test_every_linear_layer_of_the_bundled_model_is_rewritten(bundled: bytes) -> None:
    rewritten, count = dynamic_int8(bundled)
    # 6 layers x (query, key, value, attention output, intermediate, output) = 36; the two
    # activation-by-activation products per layer (scores, context) stay float MatMuls.
    assert count == 36
    ops = [node.op_type for node in onnx.load_from_string(rewritten).graph.node]
    assert ops.count("DynamicQuantizeMatMul") == 36
    assert ops.count("MatMul") == 12


def test_the_weights_are_uint8_so_every_cpu_computes_the_same_vectors(bundled: bytes) -> None:
    """u8*s8 on x86 without VNNI sums pairs of products in saturating 16 bits, so an AVX2
    machine's vectors differed from a VNNI machine's (moving the measured thresholds); the
    same integers as uint8 with zero point 128 take a kernel that is exact on every CPU."""
    model = onnx.load_from_string(dynamic_int8(bundled)[0])
    tensors = {t.name: t for t in model.graph.initializer}
    original = {t.name: t for t in onnx.load_from_string(bundled).graph.initializer}
    for node in model.graph.node:
        if node.op_type != "DynamicQuantizeMatMul":
            continue
        weight, zero = tensors[node.input[1]], tensors[node.input[3]]
        assert weight.data_type == zero.data_type == TensorProto.UINT8
        assert set(numpy_helper.to_array(zero).reshape(-1)) == {128}
        signed = original[node.input[1].removesuffix("__uint8")]
        assert np.array_equal(
            numpy_helper.to_array(weight).astype(np.int16) - 128,
            numpy_helper.to_array(signed).astype(np.int16),
        )


def test_the_rewrite_agrees_with_float_arithmetic(bundled: bytes) -> None:
    rewritten, _ = dynamic_int8(bundled)
    for text in SENTENCES:
        ids = token_ids(text)
        assert float(pooled(bundled, ids) @ pooled(rewritten, ids)) > 0.97  # "ok": 0.977


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
