"""The attention fusion on small exported-shape graphs (quipu.embeddings.attention,
quipu.embeddings.graph): the head count and the scale are read from the graph, whichever way
an exporter spells them, and the fused graph computes what the exported one does."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from quipu.embeddings.attention import fuse_attention
from quipu.embeddings.graph import Folder

HIDDEN = 32
LENGTH = 7


def _constant(name: str, value: list[int] | list[float]) -> onnx.NodeProto:
    array = np.asarray(value, dtype=np.float32 if isinstance(value[0], float) else np.int64)
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array, name))


def exported_attention(heads: int, *, inferred_heads: bool, stored_scale: bool) -> bytes:
    """One self-attention block as torch exports a BERT layer, in fp32.

    ``inferred_heads``: the heads reshape reads ``[batch, length, -1, size]`` from ``Shape``
    with start/end (the bundled embedder's export) instead of ``[batch, -1, heads, size]``.
    ``stored_scale``: ``sqrt(1 / sqrt(size))`` is a stored constant (the embedder) instead of
    computed from the heads tensor's shape at run time (the packaged reranker's export)."""
    size = HIDDEN // heads
    rng = np.random.default_rng(heads)
    weights = [
        numpy_helper.from_array(rng.normal(0, 0.3, (HIDDEN, HIDDEN)).astype(np.float32), n)
        for n in ("wq", "wk", "wv")
    ] + [
        numpy_helper.from_array(rng.normal(0, 0.1, HIDDEN).astype(np.float32), n)
        for n in ("bq", "bk", "bv")
    ]
    nodes = [
        _constant("minus_one", [-1]),
        _constant("heads", [heads]),
        _constant("size", [size]),
        _constant("hidden", [HIDDEN]),
        _constant("zero", [0]),
        _constant("one", [1]),
        _constant("axes12", [1, 2]),
        _constant("last", [-1]),
        _constant("end", [np.iinfo(np.int64).max]),
        _constant("unit", [1.0]),
        _constant("big", [-10000.0]),
        helper.make_node("Shape", ["x"], ["shape_x"]),
        helper.make_node("Gather", ["shape_x", "zero_s"], ["batch"], axis=0),
        helper.make_node("Gather", ["shape_x", "one_s"], ["length"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "zero"], ["batch1"]),
        helper.make_node("Unsqueeze", ["length", "zero"], ["length1"]),
        helper.make_node("Concat", ["batch1", "length1", "hidden"], ["merged_shape"], axis=0),
    ]
    if inferred_heads:
        nodes += [
            helper.make_node("Shape", ["x"], ["b"], start=0, end=1),
            helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
            helper.make_node("Concat", ["b", "s", "minus_one", "size"], ["split"], axis=0),
        ]
    else:
        nodes.append(
            helper.make_node("Concat", ["batch1", "minus_one", "heads", "size"], ["split"], axis=0)
        )
    for side, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes += [
            helper.make_node("MatMul", ["x", f"w{side}"], [f"{side}_mm"]),
            helper.make_node("Add", [f"{side}_mm", f"b{side}"], [side]),
            helper.make_node("Reshape", [side, "split"], [f"{side}_split"]),
            helper.make_node("Transpose", [f"{side}_split"], [f"{side}_heads"], perm=perm),
        ]
    if stored_scale:
        weights.append(
            numpy_helper.from_array(np.asarray(size**-0.25, dtype=np.float32), "root_scale")
        )
    else:
        nodes += [
            helper.make_node("Shape", ["q_heads"], ["q_shape"]),
            helper.make_node("Slice", ["q_shape", "last", "end"], ["size_found"]),
            helper.make_node("Cast", ["size_found"], ["size_float"], to=TensorProto.FLOAT),
            helper.make_node("Sqrt", ["size_float"], ["root"]),
            helper.make_node("Div", ["unit", "root"], ["inverse"]),
            helper.make_node("Sqrt", ["inverse"], ["root_scale"]),
        ]
    nodes += [
        helper.make_node("Mul", ["q_heads", "root_scale"], ["q_scaled"]),
        helper.make_node("Mul", ["k_heads", "root_scale"], ["k_scaled"]),
        helper.make_node("MatMul", ["q_scaled", "k_scaled"], ["scores"]),
        helper.make_node("Sub", ["unit", "attention_mask"], ["inverted"]),
        helper.make_node("Mul", ["inverted", "big"], ["mask_flat"]),
        helper.make_node("Unsqueeze", ["mask_flat", "axes12"], ["mask"]),
        helper.make_node("Add", ["scores", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probabilities"], axis=-1),
        helper.make_node("MatMul", ["probabilities", "v_heads"], ["context"]),
        helper.make_node("Transpose", ["context"], ["context_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["context_t", "merged_shape"], ["y"]),
    ]
    weights += [
        numpy_helper.from_array(np.asarray(0, dtype=np.int64), "zero_s"),
        numpy_helper.from_array(np.asarray(1, dtype=np.int64), "one_s"),
    ]
    graph = helper.make_graph(
        nodes,
        "attention",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "length", HIDDEN]),
            helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, ["batch", "length"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "length", HIDDEN])],
        initializer=weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _run(model: bytes, x: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    (y,) = session.run(["y"], {"x": x, "attention_mask": np.ones(x.shape[:2], np.float32)})
    return np.asarray(y)


def _attributes(model: bytes) -> list[dict[str, object]]:
    return [
        {a.name: helper.get_attribute_value(a) for a in node.attribute}
        for node in onnx.load_from_string(model).graph.node
        if node.op_type == "MultiHeadAttention"
    ]


@pytest.mark.parametrize("heads", [2, 4, 8])
@pytest.mark.parametrize("inferred_heads", [False, True])
@pytest.mark.parametrize("stored_scale", [False, True])
def test_heads_and_scale_are_read_from_the_graph(
    heads: int, inferred_heads: bool, stored_scale: bool
) -> None:
    exported = exported_attention(heads, inferred_heads=inferred_heads, stored_scale=stored_scale)
    fused, count = fuse_attention(exported)
    assert count == 1
    (attributes,) = _attributes(fused)
    assert attributes["num_heads"] == heads
    assert attributes["scale"] == pytest.approx((HIDDEN // heads) ** -0.5)
    ops = [node.op_type for node in onnx.load_from_string(fused).graph.node]
    assert {"Softmax", "Transpose", "Sqrt"}.isdisjoint(ops)  # the block and its scale are gone
    x = np.random.default_rng(0).normal(size=(1, LENGTH, HIDDEN)).astype(np.float32)
    np.testing.assert_allclose(_run(fused, x), _run(exported, x), rtol=1e-4, atol=1e-5)


def test_a_block_whose_heads_cannot_be_known_is_left_alone() -> None:
    # Heads inferred (-1), and no bias right before the heads split to read the width from.
    model = onnx.load_from_string(exported_attention(4, inferred_heads=True, stored_scale=True))
    for node in model.graph.node:
        if node.op_type == "Add" and node.input[1] in {"bq", "bk", "bv"}:
            node.op_type = "Sub"  # no longer a bias the fusion knows
    assert fuse_attention(model.SerializeToString())[1] == 0


def test_the_folder_keeps_run_time_dimensions_out_of_arithmetic() -> None:
    model = onnx.load_from_string(exported_attention(4, inferred_heads=False, stored_scale=False))
    folder = Folder(model.graph)
    assert folder.dims("q_heads") == [None, 4, None, 8]
    assert folder.dims("k_heads") == [None, 4, 8, None]
    assert folder.scalar("root_scale") == pytest.approx(8**-0.25)
    assert folder.scalar("batch") is None  # known only when the model runs
    assert folder.value("q") is None  # depends on the input
    assert folder.width("q") == HIDDEN
