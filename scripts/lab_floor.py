"""Twelfth round of the retrieval lab: the least a recall with the reranker on can cost.

A cross-encoder's linear layers do a fixed amount of work per word piece. This script
measures the two factors of that floor on this machine; nothing here is part of Quipu.

``pieces`` runs any ``quipu`` command (normally ``bench locomo|longmemeval --set
reranker=...``) with ``CrossEncoder.score`` wrapped, and prints how many word pieces each
call handed the model (query and passage together, as the model reads them)::

    python scripts/lab_floor.py pieces bench locomo --limit 300 \
        --set reranker=ms-marco-minilm-l12 --out /tmp/pieces.json

``projections`` times, on one thread, every int8 linear layer of a model
(``MatMulInteger`` weights of the ONNX file) as ONNX Runtime's ``DynamicQuantizeMatMul``
(the op Quipu's int8 rewrite uses) for ``--pieces`` rows, medians of ``--runs``, and
its largest weight at 2,048 rows for reference::

    python scripts/lab_floor.py projections --model DIR/model.onnx --pieces 250

Projection time per piece x pieces per recall / cores is what a recall's reranking cannot
go below, however fast attention, GELU and layer norms become.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REFERENCE_ROWS = 2048


def pieces_command(argv: list[str]) -> None:
    from quipu.retrieval import rerank
    from quipu.surfaces.cli.app import main

    counts: list[list[int]] = []
    score = rerank.CrossEncoder.score

    def counted(self: rerank.CrossEncoder, query: str, passages: Any) -> list[float]:
        tokenizer = self._runtime.get().tokenizer
        encodings = tokenizer.encode_batch([(query, p) for p in passages])
        counts.append([len(e.ids) for e in encodings])
        return score(self, query, passages)

    rerank.CrossEncoder.score = counted  # type: ignore[method-assign]
    sys.argv = ["quipu", *argv]
    try:
        main()
    except SystemExit as exc:
        if exc.code:
            raise
    totals = sorted(sum(c) for c in counts)
    if not totals:
        sys.exit("the command made no reranker call (is reranker set?)")
    report = {
        "calls": len(totals),
        "pieces_per_call_mean": round(statistics.mean(totals), 1),
        "pieces_per_call_p50": statistics.median(totals),
        "pieces_per_call_p95": totals[int(0.95 * (len(totals) - 1))],
        "passages_per_call_mean": round(statistics.mean(len(c) for c in counts), 2),
        "pieces_per_passage_mean": round(statistics.mean(n for c in counts for n in c), 1),
    }
    print(json.dumps(report, indent=2))


def projection(rows: int, k: int, n: int) -> Any:
    """A one-node session: ``DynamicQuantizeMatMul`` of (rows x k) floats by int8 (k x n)."""
    import onnxruntime

    rng = np.random.default_rng(0)
    weight = rng.integers(-127, 128, (k, n)).astype(np.int8)
    node = helper.make_node("DynamicQuantizeMatMul", ["A", "W", "S"], ["Y"], domain="com.microsoft")
    graph = helper.make_graph(
        [node],
        "projection",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, [rows, k])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [rows, n])],
        [
            numpy_helper.from_array(weight, "W"),
            numpy_helper.from_array(np.full(n, 0.01, np.float32), "S"),
        ],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)],
    )
    model.ir_version = 8
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def projections_command(args: argparse.Namespace) -> None:
    model = onnx.load(args.model)
    weights = {t.name: tuple(t.dims) for t in model.graph.initializer}
    shapes = Counter(
        weights[node.input[1]]
        for node in model.graph.node
        if node.op_type == "MatMulInteger" and node.input[1] in weights
    )
    if not shapes:
        sys.exit(f"{args.model}: no MatMulInteger with a stored weight")
    total = 0.0
    for (k, n), count in sorted(shapes.items()):
        ms = median_ms(args.pieces, k, n, args.runs)
        total += ms * count
        rate = args.pieces * k * n / ms / 1e6
        print(f"{k} x {n}: {count} layers, {ms:.3f} ms each, {rate:.0f} GMAC/s")
    print(
        f"all {sum(shapes.values())} projections of a {args.pieces}-piece pair, one thread: "
        f"{total:.1f} ms ({total / args.pieces * 1e3:.1f} us per piece)"
    )
    # What the runtime's int8 kernel reaches when rows are plenty: the rate to compare with.
    k, n = max(shapes, key=lambda shape: shape[0] * shape[1])
    ms = median_ms(REFERENCE_ROWS, k, n, args.runs)
    rate = REFERENCE_ROWS * k * n / ms / 1e6
    print(f"reference {REFERENCE_ROWS} x {k} x {n}: {ms:.2f} ms, {rate:.0f} GMAC/s")


def median_ms(rows: int, k: int, n: int, runs: int) -> float:
    """Median wall time of one ``projection`` run, after five warm-up runs."""
    session = projection(rows, k, n)
    feed = {"A": np.random.default_rng(1).standard_normal((rows, k)).astype(np.float32)}
    for _ in range(5):
        session.run(None, feed)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "pieces":
        pieces_command(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("pieces", help="pieces ARGS...: run `quipu ARGS...` and count")
    floor = commands.add_parser("projections")
    floor.add_argument("--model", required=True)
    floor.add_argument("--pieces", type=int, default=250)
    floor.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    projections_command(args)


if __name__ == "__main__":
    main()
