"""`quipu bench scale` (issue 23): the store it builds from dialogue turns and what it reports,
on a real SQLite file with the real bundled model (a tiny LoCoMo-format file)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from quipu.embeddings.local import LocalEmbedder
from quipu.evals import scale, scale_build


def _locomo(tmp_path: Path) -> Path:
    turns = [
        {"speaker": "Caroline", "dia_id": f"D1:{i}", "text": text}
        for i, text in enumerate(
            [
                "I went to the LGBTQ support group yesterday.",
                "We painted a sunset with the kids.",
                "My new job at the shelter starts Monday.",
                "The camping trip was rainy but fun.",
            ],
            start=1,
        )
    ]
    record: dict[str, Any] = {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns,
        },
        "qa": [
            {"question": "What did Caroline do in May 2023?", "answer": "a", "evidence": ["D1:1"],
             "category": 2},
            {"question": "What did they paint?", "answer": "a", "evidence": ["D1:2"],
             "category": 1},
            {"question": "Where does Caroline work?", "answer": "a", "evidence": ["D1:3"],
             "category": 1},
        ],
    }  # fmt: skip
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([record]), encoding="utf-8")
    return path


def test_issue23_corpus_rows_are_turns_then_shifted_noisy_variants(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    corpus = scale.Corpus.load(_locomo(tmp_path), local_embedder, tmp_path / "cache")
    assert list((tmp_path / "cache").glob("turns-*.npy"))  # embedded once, kept
    rows = list(corpus.rows(10))
    assert len(rows) == 10
    assert [r[0] for r in rows[:4]] == corpus.texts
    assert rows[4][0] == corpus.texts[0] + " (#1)" and rows[9][0] == corpus.texts[1] + " (#2)"
    # variants move into the past: a row dated after now would be invisible to recall yet
    # first in every walk by recency (issue 23: 60 % of the 100k scope was in the future)
    assert rows[0][1] - rows[4][1] == timedelta(days=211)
    assert max(r[1] for r in rows) == max(corpus.observed)
    assert np.array_equal(rows[0][2], corpus.vectors[0])
    assert abs(float(np.linalg.norm(rows[4][2])) - 1.0) < 1e-5
    assert 0.9 < float(rows[4][2] @ corpus.vectors[0]) < 0.99  # near its turn, not equal


def test_issue23_bench_scale_reports_stages_floors_and_pages(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    data = _locomo(tmp_path)
    target = str(tmp_path / "scale.db")
    run = scale.run(
        target,
        data=data,
        cache_dir=tmp_path / "cache",
        sizes=[12],
        undated=2,
        ingest_turns=2,
        cold=False,
        details=True,
    )
    scope = run["scopes"]["12"]
    assert scope["build"]["built"] is True
    assert run["questions"] == {"dated": 1, "undated": 2}
    assert scope["dated"]["questions"] == 1 and scope["undated"]["questions"] == 2
    assert {"embed_ms", "vector_ms", "text_ms"} <= scope["undated"]["stages_ms"].keys()
    assert scope["floors"]["scope_vectors"] == 12
    assert scope["floors"]["numpy_exact_scan_ms"]["p50"] >= 0
    pages = scope["undated"]["results"]
    assert all(0 < len(ids) <= 10 for ids in pages.values())
    assert run["ingest"]["turns"] == 2
    again = scale.run(
        target, data=data, cache_dir=tmp_path / "cache", sizes=[12], undated=2,
        ingest_turns=0, cold=False, details=True,
    )  # fmt: skip
    assert again["scopes"]["12"]["build"]["built"] is False  # reused, not rebuilt
    same = scale.paired(pages, again["scopes"]["12"]["undated"]["results"])
    assert same["identical"] == same["questions"] == 2


def test_issue23_bench_scale_small_tenants_inside_and_alone(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    """N tenants built in large transactions through the import path, each its own slice of
    the turns; the middle one recalled inside the store and alone returns the same pages (same
    ids: fixed by scope and text), and a second run rebuilds nothing."""
    data = _locomo(tmp_path)
    target = str(tmp_path / "tenants.db")
    kwargs: dict[str, Any] = {
        "data": data, "cache_dir": tmp_path / "cache", "sizes": [], "tenants": 3,
        "per_tenant": 3, "alone": str(tmp_path / "alone.db"), "rounds": 1, "undated": 2,
        "ingest_turns": 0, "cold": False, "rss_walk": False,
    }  # fmt: skip
    run = scale.run(target, **kwargs)
    assert run["tenants_build"]["built"] == 3 and run["tenants_build"]["rows_written"] == 9
    small = run["small_tenant"]
    assert small["tenant"] == "scale-tenant-0001"
    assert small["same_pages"]["identical"] == small["same_pages"]["questions"] == 2
    assert small["in_store_ms"]["p50"] > 0 and small["alone_ms"]["p50"] > 0
    corpus = scale.Corpus.load(data, local_embedder, tmp_path / "cache")
    assert [r[0] for r in scale_build.tenant_rows(corpus, 1, 3)] == corpus.texts[
        3:4
    ] + corpus.texts[:2]
    again = scale.run(target, **kwargs)
    assert again["tenants_build"]["built"] == 0  # every tenant holds its rows: reused
    walk = scale.rss_walk(target, 3, None, graph=True)
    assert set(walk["after_scopes_mib"]) == {"1", "3"} and walk["after_open_mib"] > 0
