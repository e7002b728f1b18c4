"""What the rewrites of the bundled model's ONNX graph share (quantize, attention, fuse)."""

from __future__ import annotations

import onnx
from onnx import helper

#: ONNX Runtime's own operators (DynamicQuantizeMatMul, MultiHeadAttention, Gelu).
CONTRIB = "com.microsoft"


def consumers(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    """Each tensor name -> the nodes that read it."""
    out: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            out.setdefault(name, []).append(node)
    return out


def sole_consumer(
    name: str, readers: dict[str, list[onnx.NodeProto]], op_type: str
) -> onnx.NodeProto | None:
    """The one node reading ``name``, if there is exactly one and it is an ``op_type``."""
    found = readers.get(name, [])
    return found[0] if len(found) == 1 and found[0].op_type == op_type else None


def use_contrib_ops(model: onnx.ModelProto) -> None:
    """Declare ONNX Runtime's operator domain on ``model`` (once)."""
    if not any(opset.domain == CONTRIB for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid(CONTRIB, 1))
