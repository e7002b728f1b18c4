"""Fuse a packaged BERT model's self-attention into ONNX Runtime's ``MultiHeadAttention``.

Both packaged graphs (the bundled embedder and the opt-in reranker,
:mod:`quipu.retrieval.rerank`) are torch exports: each layer's attention is spelt out in ~40
small nodes (reshapes and transposes of the heads, a key transpose through shape arithmetic,
a scale on each side of the score product, an additive mask built from ``attention_mask``,
sometimes a NaN guard after the softmax). ONNX Runtime's own optimizer does not recognise
that shape. :func:`fuse_attention` replaces each layer's chain, from the projected query, key
and value to the re-merged heads, with one ``MultiHeadAttention`` node and drops what no
longer feeds the output. The head count and the scale are read from the graph
(:class:`quipu.embeddings.graph.Folder`): the embedder's export stores the scale and leaves
the head count to a ``-1``; the reranker's states the head count and computes the scale from
the head size at run time. A block whose heads or scale cannot be read stays as it is.

The mask is dropped with it. That is exact only because neither model is ever padded: each
runs one text (or one query-passage pair) at a time with an all-ones ``attention_mask``, so
the mask adds zero to every score and the NaN guard never fires.

Measured on 2 Xeon cores, one thread: the embedder's 17-piece query 1.99 ms before, 1.44 ms
after (with ``SkipLayerNormFusion`` off, see ``local.py``), vectors agreeing at cosine > 0.99
(the 8-bit activations round a little differently when float sums change order); the
reranker's ten LoCoMo passages 191 ms before, 150 ms after, on two threads (docs/benchmarks.md,
eleventh round).
"""

from __future__ import annotations

import onnx
from onnx import helper

from quipu.embeddings.graph import CONTRIB, Folder, consumers, sole_consumer, use_contrib_ops

_SHAPE_OPS = ("Reshape", "Transpose")


def fuse_attention(model_bytes: bytes) -> tuple[bytes, int]:
    """The model with each recognised attention block made one ``MultiHeadAttention`` node,
    and how many were fused (0: nothing matched and the model comes back unchanged)."""
    model = onnx.load_from_string(model_bytes)
    fused = fuse_attention_in(model)
    return (model.SerializeToString(), fused) if fused else (model_bytes, 0)


def fuse_attention_in(model: onnx.ModelProto) -> int:
    """:func:`fuse_attention` on a loaded model, in place (each fused block is exact on its
    own, so a partial match still leaves a correct graph); returns how many were fused. Nodes
    and constants nothing reads any more are dropped."""
    graph = model.graph
    folder = Folder(graph)
    producers = folder.producers
    readers = consumers(graph)

    fused: dict[str, onnx.NodeProto] = {}  # the re-merging Reshape's output -> its replacement
    for softmax in (node for node in graph.node if node.op_type == "Softmax"):
        block = _attention_block(softmax, producers, readers, folder)
        if block is None:
            continue
        query, key, value, heads, scale, output = block
        fused[output] = helper.make_node(
            "MultiHeadAttention",
            [query, key, value],
            [output],
            name=f"fused_attention_{len(fused)}",
            domain=CONTRIB,
            num_heads=heads,
            scale=scale,
        )
    if not fused:
        return 0
    nodes = [fused.get(node.output[0], node) if node.output else node for node in graph.node]
    live = _live(nodes, {output.name for output in graph.output})
    kept_nodes = [node for node in nodes if id(node) in live]
    used = {name for node in kept_nodes for name in node.input}
    del graph.node[:]
    graph.node.extend(kept_nodes)
    # Deleted in place: extending a protobuf list copies each tensor (here ~21 MB of weights).
    for at in reversed(range(len(graph.initializer))):
        if graph.initializer[at].name not in used:
            del graph.initializer[at]
    use_contrib_ops(model)
    return len(fused)


def _attention_block(
    softmax: onnx.NodeProto,
    producers: dict[str, onnx.NodeProto],
    readers: dict[str, list[onnx.NodeProto]],
    folder: Folder,
) -> tuple[str, str, str, int, float, str] | None:
    """(query, key, value, heads, scale, merged output) of the block around ``softmax``, or
    None when the block is not the exported shape this module knows."""
    masked = producers.get(softmax.input[0])
    if masked is None or masked.op_type != "Add":
        return None
    scores = next(
        (producers[n] for n in masked.input if n in producers and producers[n].op_type == "MatMul"),
        None,
    )
    if scores is None:
        return None
    sides = [_scaled(producers.get(name), folder) for name in scores.input]
    if sides[0] is None or sides[1] is None:
        return None
    (query_heads, query_scale), (key_heads, key_scale) = sides[0], sides[1]
    probabilities = softmax.output[0]
    guard = next((n for n in readers.get(probabilities, []) if n.op_type == "Where"), None)
    weights = guard.output[0] if guard is not None else probabilities
    context = next((n for n in readers.get(weights, []) if n.op_type == "MatMul"), None)
    if context is None or context.input[0] != weights:
        return None
    merge = sole_consumer(context.output[0], readers, "Transpose")
    merged = sole_consumer(merge.output[0], readers, "Reshape") if merge else None
    if merged is None:
        return None
    query = _through_shapes(query_heads, producers)
    heads = _heads(query_heads, query, folder)
    if heads is None:
        return None
    key = _through_shapes(key_heads, producers)
    value = _through_shapes(context.input[1], producers)
    return query, key, value, heads, query_scale * key_scale, merged.output[0]


def _scaled(node: onnx.NodeProto | None, folder: Folder) -> tuple[str, float] | None:
    """``x * c`` where ``c`` is one number the graph computes from constants: (x, c). The
    exporter either stores ``c`` or derives it from the head size at run time."""
    if node is None or node.op_type != "Mul":
        return None
    left, right = node.input
    for tensor, constant in ((left, right), (right, left)):
        value = folder.scalar(constant)
        if value is not None:
            return tensor, value
    return None


def _heads(query_heads: str, query: str, folder: Folder) -> int | None:
    """How many heads the query is split into, ``[batch, heads, length, size]``: as the
    reshape before the transpose states it, or the projection's width over the head size
    when the reshape leaves the count to be inferred (-1)."""
    dims = folder.dims(query_heads)
    if dims is None or len(dims) != 4 or dims[3] is None:
        return None
    if dims[1] is not None:
        return dims[1]
    width = folder.width(query)
    if width is None or width % dims[3]:
        return None
    return width // dims[3]


def _through_shapes(name: str, producers: dict[str, onnx.NodeProto]) -> str:
    """The tensor ``name`` was reshaped/transposed from: the projection before the heads split."""
    node = producers.get(name)
    while node is not None and node.op_type in _SHAPE_OPS:
        name = node.input[0]
        node = producers.get(name)
    return name


def _live(nodes: list[onnx.NodeProto], outputs: set[str]) -> set[int]:
    """Ids of the nodes the graph outputs depend on (nodes are in topological order)."""
    needed, live = set(outputs), set()
    for node in reversed(nodes):
        if any(name in needed for name in node.output):
            live.add(id(node))
            needed.update(node.input)
    return live
