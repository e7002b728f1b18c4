"""Run the bundled model's int8 weights as int8 arithmetic.

The packaged ``model.onnx`` stores each linear layer's weights as int8 with one scale per
output column, and turns them back into float32 before every ``MatMul``
(``MatMul(x, Mul(Cast(W_int8), scale))``): the arithmetic is float32. :func:`dynamic_int8`
rewrites each of those into ONNX Runtime's ``DynamicQuantizeMatMul``, which quantizes ``x``
to uint8 at run time and multiplies it with the same int8 weights in integer arithmetic
(VNNI/AMX on x86, dot-product instructions on ARM). The weights keep their values (stored as
uint8 with zero point 128, see :func:`_as_uint8`); what changes is that activations are
rounded to 8 bits, per tensor.

The uint8 form makes the vectors the same on every CPU. With int8 weights, an AVX2 machine
without VNNI (measured: AMD EPYC, 2 cores) saturated its 16-bit pair sums and its vectors
moved enough that two measured thresholds came out different (novelty 0.585 instead of 0.579,
corroboration 0.306 instead of 0.388); with uint8 weights it reproduces the VNNI machine's
figures exactly. It costs that machine 1.2-1.3x per text (median of 200 in one thread,
interleaved: a 13-word query 2.54-2.56 -> 3.30-3.33 ms, a 42-word text 8.27-8.41 -> 9.89-9.99
ms, load 0.9-1.9).

Measured on 2 Xeon cores (AVX-512 VNNI), one thread: a 16-piece query embeds in 2.0 ms
instead of 6.8 ms; vectors agree with the float32 arithmetic at cosine ~0.99. Because the
activation scale is taken over the whole input tensor, a text's vector would depend on what
else is in its batch: the embedder therefore runs this model one text at a time.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from quipu.embeddings.graph import CONTRIB, use_contrib_ops

_INT8 = onnx.TensorProto.INT8


def dynamic_int8(model_bytes: bytes) -> tuple[bytes, int]:
    """The model with every int8-weight ``MatMul`` made a ``DynamicQuantizeMatMul``, and how
    many were rewritten (0: the model has no such pattern and comes back unchanged)."""
    model = onnx.load_from_string(model_bytes)
    rewritten = rewrite_int8(model)
    return (model.SerializeToString(), rewritten) if rewritten else (model_bytes, 0)


def rewrite_int8(model: onnx.ModelProto) -> int:
    """:func:`dynamic_int8` on a loaded model, in place; returns how many were rewritten."""
    graph = model.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    producers = {output: node for node in graph.node for output in node.output}
    nodes: list[onnx.NodeProto] = []
    rewritten = 0
    for node in graph.node:
        weights = _int8_weights(node, producers, initializers)
        if weights is None:
            nodes.append(node)
            continue
        quantized, scale = weights
        column_scale = f"{scale.name}__per_column"
        values = numpy_helper.to_array(scale).astype(np.float32).reshape(-1)
        graph.initializer.append(numpy_helper.from_array(values, column_scale))
        unsigned, zero = _as_uint8(initializers[quantized], values.size)
        graph.initializer.extend([unsigned, zero])
        nodes.append(
            helper.make_node(
                "DynamicQuantizeMatMul",
                [node.input[0], unsigned.name, column_scale, zero.name],
                [node.output[0]],
                name=f"{node.name}__int8",
                domain=CONTRIB,
            )
        )
        rewritten += 1
    if not rewritten:
        return 0
    del graph.node[:]
    graph.node.extend(nodes)
    use_contrib_ops(model)
    # The float32 copies of the weights (Cast, Mul) are now unused; ONNX Runtime's graph
    # optimizer drops them when the session loads.
    return rewritten


def _as_uint8(weight: onnx.TensorProto, scales: int) -> tuple[onnx.TensorProto, onnx.TensorProto]:
    """``weight`` as uint8 with zero point 128 (one per scale): the same integers, ``w + 128 -
    128``, so every product is exact. Int8 weights would take ONNX Runtime's u8*s8 kernel,
    which on x86 without VNNI adds pairs of products in saturating 16-bit arithmetic
    (``vpmaddubsw``): vectors then depend on the CPU (AVX2 machines differed from AVX-512 VNNI
    ones by enough to move measured thresholds). The u8*u8 kernel widens first on every CPU."""
    shifted = (numpy_helper.to_array(weight).astype(np.int16) + 128).astype(np.uint8)
    zero = np.full((scales,) if scales > 1 else (), 128, dtype=np.uint8)
    return (
        numpy_helper.from_array(shifted, f"{weight.name}__uint8"),
        numpy_helper.from_array(zero, f"{weight.name}__zero_point"),
    )


def _int8_weights(
    node: onnx.NodeProto,
    producers: dict[str, onnx.NodeProto],
    initializers: dict[str, onnx.TensorProto],
) -> tuple[str, onnx.TensorProto] | None:
    """``(int8 weight name, scale)`` when ``node`` is ``MatMul(x, Mul(Cast(W_int8), s))`` with
    one scale per output column (or one for all); ``None`` otherwise."""
    if node.op_type != "MatMul" or len(node.input) != 2:
        return None
    mul = producers.get(node.input[1])
    if mul is None or mul.op_type != "Mul" or mul.input[1] not in initializers:
        return None
    cast = producers.get(mul.input[0])
    if cast is None or cast.op_type != "Cast" or cast.input[0] not in initializers:
        return None
    weight = initializers[cast.input[0]]
    scale = initializers[mul.input[1]]
    if weight.data_type != _INT8 or len(weight.dims) != 2:
        return None
    columns = weight.dims[1]
    count = int(np.prod(scale.dims)) if scale.dims else 1
    if count not in (1, columns) or (count == columns and scale.dims[-1] != columns):
        return None
    return cast.input[0], scale
