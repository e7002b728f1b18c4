"""Pure domain logic: lifecycle table, scopes, versions, fusion, BM25, validation, cursors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from quipu.core.lifecycle import LIVE, TRANSITIONS, check_transition
from quipu.core.query import Candidate, Cursor
from quipu.core.records import Principal, Role, Scope, Status
from quipu.core.scopes import GLOBAL_TENANT, resolve_scope
from quipu.core.text import content_hash, fold
from quipu.core.versions import valid_at_instant
from quipu.errors import Conflict, Forbidden, InvalidInput
from quipu.retrieval.bm25 import Postings, tokenize
from quipu.retrieval.fusion import rrf

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def test_life_001_transition_table_is_closed_and_forget_is_final() -> None:
    assert set(TRANSITIONS) == set(Status)
    assert TRANSITIONS[Status.UNAVAILABLE] == frozenset()
    for source, targets in TRANSITIONS.items():
        assert source not in targets
    with pytest.raises(Conflict):
        check_transition(Status.UNAVAILABLE, Status.ACTIVE)
    check_transition(Status.CANDIDATE, Status.ACTIVE)
    assert Status.SUPERSEDED not in LIVE and Status.ACTIVE in LIVE


def test_scope_003_owner_derivation() -> None:
    p = Principal("t", "k1", Role.AGENT, agent_id="a1", user_id="u1")
    assert resolve_scope(p, "agent").owner == "a1"
    assert resolve_scope(Principal("t", "k1", Role.AGENT), "agent").owner == "k1"
    assert resolve_scope(p, "user").owner == "u1"
    assert resolve_scope(p, "agent_user").owner == "a1\x1fu1"
    assert resolve_scope(p, "tenant").owner == "t"
    with pytest.raises(Forbidden):
        resolve_scope(p, "global")
    root = Principal("t", "k0", Role.SUPERADMIN)
    assert resolve_scope(root, Scope.GLOBAL).tenant_id == GLOBAL_TENANT
    with pytest.raises(InvalidInput) as err:
        resolve_scope(Principal("t", "k", Role.AGENT, agent_id="a"), "agent_user")
    assert err.value.code == "subject_unresolvable"


def test_mem_006_fold_and_hash() -> None:
    assert fold("  Ｄａｎａ\tPREFERS  seats ") == "dana prefers seats"
    assert content_hash("Dana prefers seats") == content_hash("dana   PREFERS seats")
    assert content_hash("Dana prefers seats") != content_hash("Dana prefers seat")


def test_mem_002_validity_interval_is_half_open() -> None:
    assert valid_at_instant(T0, None, T0)
    assert not valid_at_instant(T0, None, T0 - timedelta(microseconds=1))
    assert not valid_at_instant(T0, T0 + timedelta(days=1), T0 + timedelta(days=1))


def test_recall_001_rrf_sums_weighted_reciprocal_ranks() -> None:
    fused = rrf(
        {"a": [Candidate(1, 0.9), Candidate(2, 0.5)], "b": [Candidate(2, 3.0), Candidate(3, 1.0)]},
        k=60,
    )
    assert [key for key, _, _ in fused] == [2, 1, 3]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[0][2] == ("a", "b")
    weighted = rrf({"a": [Candidate(1, 0)], "b": [Candidate(2, 0)]}, {"a": 1.0, "b": 2.0}, k=60)
    assert [key for key, _, _ in weighted] == [2, 1]
    tie = rrf({"a": [Candidate(7, 0)], "b": [Candidate(5, 0)]})
    assert [key for key, _, _ in tie] == [5, 7]


def test_recall_001_bm25_prefers_rare_terms_and_matches_stems() -> None:
    assert tokenize("The Flights were running!") == ["flight", "run"]
    bulk, incremental = Postings(), Postings()
    docs = [
        tokenize(t) for t in ["dana likes flights", "dana likes tea", "ravi runs daily", "dana"]
    ]
    bulk.bulk_add(docs)
    for i, d in enumerate(docs):
        incremental.add(i, d)
    for index in (bulk, incremental):
        scores = index.scores(tokenize("dana flying flight"))
        assert scores is not None
        assert int(np.argmax(scores)) == 0 and scores[2] == 0
        assert index.scores(tokenize("zebra")) is None
    np.testing.assert_allclose(bulk.scores(["dana"]), incremental.scores(["dana"]), rtol=1e-6)  # type: ignore[arg-type]


def test_api_002_cursor_round_trip_and_garbage() -> None:
    c = Cursor("1700000000000000", "abc")
    assert Cursor.decode(c.encode()) == c
    for bad in ["%%%", "e30", "WzEsMl0"]:
        with pytest.raises(InvalidInput):
            Cursor.decode(bad)


def test_mem_005_token_bucket_arithmetic() -> None:
    from quipu.core.buckets import spend

    assert spend(3.0, 0.0, 1.0, 5) == (2.0, 0.0)
    assert spend(0.5, 0.0, 2.0, 5) == (0.5, 0.25)
    assert spend(0.0, 100.0, 1.0, 5) == (4.0, 0.0)  # refill is capped at the burst
    assert spend(0.5, -3.0, 1.0, 5) == (0.5, 0.5)  # a clock step backwards refills nothing


def test_postings_add_counts_takes_weighted_occurrences() -> None:
    """``add`` is ``add_counts`` of whole occurrences; a half-weight occurrence scores between
    none and one, and counts half toward the document's length."""
    plain, counted = Postings(), Postings()
    for position, tokens in enumerate([["tent", "trip"], ["tent", "tent"], ["boot"]]):
        plain.add(position, tokens)
        counts: dict[str, float] = {}
        for token in tokens:
            counts[token] = counts.get(token, 0.0) + 1.0
        counted.add_counts(position, counts)
    assert plain.scores(["tent"]).tolist() == counted.scores(["tent"]).tolist()  # type: ignore[union-attr]
    assert counted.document_frequency("tent") == 2 and counted.document_frequency("x") == 0

    weighted = Postings()
    weighted.add_counts(0, {"tent": 1.0, "trip": 1.0})
    weighted.add_counts(1, {"tent": 0.5, "trip": 1.0})
    weighted.add_counts(2, {"trip": 1.0, "boot": 1.0})
    scores = weighted.scores(["tent"])
    assert scores is not None and scores[0] > scores[1] > scores[2] == 0.0
    assert len(weighted) == 3
