"""`quipu bench recall` end to end on a small SQLite store: the figures issue 4 asks for are
all in its JSON (load rate, latency in the big scope and in a small tenant, bytes per row)."""

from __future__ import annotations

import asyncio
import json
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
from typer.testing import CliRunner

from quipu.embeddings.local import LocalEmbedder
from quipu.evals.http_load import _drive, cpu_seconds
from quipu.evals.perf import SentenceVectors, sentence
from quipu.surfaces.cli.app import app


def test_bench_recall_reports_the_store_and_a_small_background_tenant(tmp_path: Path) -> None:
    out = tmp_path / "recall.json"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "recall",
            "-n",
            "300",
            "--owners",
            "3",
            "--queries",
            "5",
            "--background",
            "200",
            "--background-tenants",
            "4",
            "--set",
            "feedback_weight=0",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    body = json.loads(out.read_text())
    assert body["rows"] == 500 and body["scope_rows"] == 100
    assert body["background_tenants"] == 4 and body["background_scope"]["tenant_rows"] == 50
    assert body["vector_paths"] == ["exact-numpy"]
    assert body["background_scope"]["latency_ms"]["p50"] > 0
    assert body["underfilled_pages"] == 0 and body["background_scope"]["underfilled_pages"] == 0
    assert body["load_rows_per_s"] > 0 and body["bytes_per_row"] > 0
    assert body["overrides"] == {"feedback_weight": "0"}


def test_sentence_vectors_keep_the_neighbourhoods_of_the_text() -> None:
    """Rows of the same sentence template sit together; other templates do not."""

    rng = random.Random(1)
    texts = [sentence(rng) for _ in range(50)]
    twin = texts[0].rsplit(" (#", 1)[0] + " (#42)"
    vectors = SentenceVectors(LocalEmbedder(), seed=1)([*texts, twin])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    same = float(vectors[0] @ vectors[-1])
    others = [
        float(vectors[0] @ v)
        for t, v in zip(texts[1:], vectors[1:-1], strict=True)
        if t.rsplit(" (#", 1)[0] != texts[0].rsplit(" (#", 1)[0]
    ]
    assert same > 0.8 and same > max(others)


def test_bench_http_reads_a_process_cpu_time() -> None:
    """`bench http` reports server CPU per request from this reading."""
    before = cpu_seconds(os.getpid())
    sum(i * i for i in range(200_000))
    assert cpu_seconds(os.getpid()) >= before > 0
    assert cpu_seconds(2**22 + 12345) == 0.0  # no such process


def test_bench_http_load_generator_frames_responses_and_counts_statuses() -> None:
    """The raw HTTP/1.1 client of `bench http` reads each answer whole on a kept-alive
    connection (body length from Content-Length) and counts statuses, 5xx included."""
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            body = await reader.readexactly(length)
            seen.append(body)
            status, answer = (503, b'{"error":"busy"}') if b'"n": 2' in body else (200, b"{}" * 50)
            writer.write(
                f"HTTP/1.1 {status} X\r\nContent-Length: {len(answer)}\r\n\r\n".encode() + answer
            )
            await writer.drain()
        writer.close()

    async def main() -> dict[str, Any]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            return await _drive(f"http://127.0.0.1:{port}", 2, 5, lambda i: ("/x", {"n": i}))
        finally:
            server.close()

    result = asyncio.run(main())
    assert sorted(json.loads(b)["n"] for b in seen) == [0, 1, 2, 3, 4]
    assert result["status_counts"] == {"200": 4, "503": 1}
    assert result["server_errors"] == 1 and result["ok_responses"] == 4
    assert result["requests"] == 5 and result["latency_ms"]["p50"] > 0
