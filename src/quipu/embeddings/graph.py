"""What the rewrites of a packaged model's ONNX graph share (quantize, attention, fuse)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import helper, numpy_helper

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


_UNKNOWN = np.iinfo(np.int64).min  # a dimension only known when the model runs
_INDEX_OPS = ("Concat", "Gather", "Slice", "Unsqueeze", "Squeeze")
_PRODUCTS = ("MatMul", "MatMulInteger", "DynamicQuantizeMatMul")
_ARITHMETIC = {
    "Sqrt": np.sqrt,
    "Div": np.divide,
    "Mul": np.multiply,
    "Add": np.add,
    "Sub": np.subtract,
    "Pow": np.power,
}


class Folder:
    """Values a graph computes from constants alone, folded in numpy: the shape arithmetic an
    exporter leaves behind (a head count inside a ``Concat``, a scale of
    ``sqrt(1 / sqrt(head size))``). ``Shape`` of a tensor yields the dimensions known
    before the model runs (those a ``Reshape`` fixes, carried through ``Transpose``);
    arithmetic on a dimension only known at run time yields ``None``."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        # Each tensor name -> the node that computes it (the fusion reads it too).
        self.producers = {output: node for node in graph.node for output in node.output}
        self._constants = {t.name: t for t in graph.initializer}
        self._cache: dict[str, npt.NDArray[Any] | None] = {}

    def value(self, name: str) -> npt.NDArray[Any] | None:
        """``name``'s value, or ``None`` when it depends on the model's inputs. Dimensions only
        known at run time may sit in shape vectors as the lowest int64, never in arithmetic."""
        if name not in self._cache:
            self._cache[name] = self._fold(name)
        return self._cache[name]

    def scalar(self, name: str) -> float | None:
        """``name``'s value if it is one fully known number."""
        found = self.value(name)
        if found is None or found.size != 1 or bool(np.any(found == _UNKNOWN)):
            return None
        return float(found.reshape(-1)[0])

    def dims(self, name: str) -> list[int | None] | None:
        """The dimensions of tensor ``name`` that are fixed before the model runs (``None``
        for the others), when the graph says how many it has."""
        node = self.producers.get(name)
        if node is None:
            return None
        if node.op_type == "Transpose":
            inner = self.dims(node.input[0])
            perm = _ints(node, "perm")
            if inner is None or perm is None or sorted(perm) != list(range(len(inner))):
                return None
            return [inner[axis] for axis in perm]
        if node.op_type == "Reshape":
            target = self.value(node.input[1])
            if target is None or target.ndim != 1:
                return None
            return [int(d) if d > 0 else None for d in target.tolist()]
        return None

    def _fold(self, name: str) -> npt.NDArray[Any] | None:
        if name in self._constants:
            return numpy_helper.to_array(self._constants[name])
        node = self.producers.get(name)
        if node is None:
            return None  # a graph input
        if node.op_type == "Constant":
            tensor = next((a.t for a in node.attribute if a.name == "value"), None)
            return None if tensor is None else numpy_helper.to_array(tensor)
        if node.op_type == "Shape":
            return self._shape(node)
        if node.op_type == "Gather" and len(node.input) == 2:
            dimension = self._one_dimension(node)
            if dimension is not None:
                return dimension
        if not node.input:
            return None
        args: list[npt.NDArray[Any]] = []
        for operand in node.input:
            folded = self.value(operand) if operand else None
            if folded is None:
                return None  # an input-dependent or skipped operand
            args.append(folded)
        if node.op_type in _INDEX_OPS:
            return _index(node, args)
        if any(bool(np.any(a == _UNKNOWN)) for a in args if a.dtype == np.int64):
            return None
        if node.op_type == "Cast":
            to = _ints(node, "to")
            if to is None:
                return None
            return args[0].astype(helper.tensor_dtype_to_np_dtype(to[0]))
        operation = _ARITHMETIC.get(node.op_type)
        return None if operation is None else np.asarray(operation(*args))

    def _shape(self, node: onnx.NodeProto) -> npt.NDArray[Any] | None:
        """``Shape(x)``, or its ``start``..``end`` part (opset 15): what is known of it."""
        start, end = _ints(node, "start"), _ints(node, "end")
        dims = self.dims(node.input[0])
        if dims is not None:
            part = dims[slice(start[0] if start else None, end[0] if end else None)]
            return np.asarray([_UNKNOWN if d is None else d for d in part], dtype=np.int64)
        if start is None or end is None or start[0] < 0 or end[0] < start[0]:
            return None  # its length depends on the rank, which the graph does not say
        return np.full(end[0] - start[0], _UNKNOWN, dtype=np.int64)

    def width(self, name: str) -> int | None:
        """The last dimension of a projection's output: a constant bias added to it, or the
        constant weight matrix it is multiplied by."""
        node = self.producers.get(name)
        if node is None:
            return None
        for operand in node.input:
            constant = self._constants.get(operand)
            if constant is None:
                continue
            if node.op_type == "Add" and len(constant.dims) == 1:
                return int(constant.dims[0])
            if node.op_type in _PRODUCTS and len(constant.dims) == 2 and operand == node.input[1]:
                return int(constant.dims[1])
        return None

    def _one_dimension(self, gather: onnx.NodeProto) -> npt.NDArray[Any] | None:
        """``Gather(Shape(x), i)`` for one index ``i`` is one dimension of ``x``, known or not,
        even when the graph does not say how many dimensions ``x`` has."""
        source = self.producers.get(gather.input[0])
        index = self.value(gather.input[1])
        if source is None or source.op_type != "Shape" or index is None or index.ndim != 0:
            return None
        if source.attribute or self.value(gather.input[0]) is not None:
            return None  # sliced Shape, or a known shape: the general path takes it
        return np.asarray(_UNKNOWN, dtype=np.int64)


def _index(node: onnx.NodeProto, args: list[npt.NDArray[Any]]) -> npt.NDArray[Any] | None:
    """The index operations shape arithmetic uses, opset 13 and later (axes as inputs)."""
    if node.op_type == "Concat":
        axis = (_ints(node, "axis") or [0])[0]
        return np.concatenate([np.atleast_1d(a) for a in args], axis=axis)
    if node.op_type == "Gather":
        axis = (_ints(node, "axis") or [0])[0]
        return np.take(args[0], args[1], axis=axis)
    if node.op_type == "Unsqueeze" and len(args) == 2:
        return np.expand_dims(args[0], tuple(int(a) for a in args[1].reshape(-1)))
    if node.op_type == "Squeeze" and len(args) == 2:
        return np.squeeze(args[0], tuple(int(a) for a in args[1].reshape(-1)))
    if node.op_type == "Slice" and len(args) >= 3 and args[0].ndim == 1:
        start, end = int(args[1].reshape(-1)[0]), int(args[2].reshape(-1)[0])
        step = int(args[4].reshape(-1)[0]) if len(args) > 4 else 1
        return args[0][slice(start, end, step)]
    return None


def _ints(node: onnx.NodeProto, name: str) -> list[int] | None:
    for attribute in node.attribute:
        if attribute.name == name:
            value = helper.get_attribute_value(attribute)
            return [int(v) for v in value] if isinstance(value, list) else [int(value)]
    return None
