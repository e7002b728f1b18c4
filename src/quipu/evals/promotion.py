"""The promotion eval (EVAL-2, first part): how well an extractor finds what is durable.

It measures and never gates: nothing in promotion reads these numbers.

The dataset
    ``evals/data/promotion/sessions_v1.json`` holds short sessions written for this eval
    (facts, preferences, decisions, procedures, corrections, chit-chat with nothing
    durable, hypotheticals, injection attempts whose right answer is "nothing durable",
    and secrets that must not survive). Each session lists its **gold** memories: a kind,
    a canonical text, and **keys** (the terms a correct memory cannot lack). Borderline
    items are ``optional``. Sessions are split into ``dev`` (used to tune the deterministic
    extractor) and ``test`` (written at the same time, not tuned on).

Matching (one criterion for every extractor)
    Texts are reduced to content terms: NFKC, accents stripped, lower case, ``n't`` read
    as ``not``, number words one to twenty and ordinals ("3rd") read as digits, a short
    stop-word list removed
    (negations are kept, and so is ``may``), ``user`` removed, Snowball-stemmed. A
    candidate matches a gold memory when all of these hold:

    1. the kinds are equal (for an ``optional`` item any kind will do);
    2. every key is present: a key is ``alt|alt``, an alternative is present when all
       its terms are in the candidate's terms;
    3. the candidate covers at least :data:`MIN_COVERAGE` of the canonical text's terms;
    4. the candidate is not padded: at most ``2 * |canonical terms| + 6`` terms, so a
       prediction that pastes a whole turn cannot match everything it mentions.

    Matching is one-to-one (a maximum bipartite matching, so order does not matter and
    one candidate never earns two gold items). Candidates left over that match an
    optional item are ignored; every other left-over candidate is a false positive.

The scores
    Precision, recall and F1 per kind and overall (micro-averaged): a kind's precision is
    over candidates predicted with that kind, its recall over gold items of that kind.
    Undefined ratios (nothing predicted, nothing to find) are ``None``, shown as "—".
    Beside them: secret leaks (a listed secret, or anything ``find_secrets`` flags, in a
    candidate's text or quote), injection sessions that stayed clean (no false positive),
    nothing-durable sessions with no false positive (an optional item may be found),
    correction hints that name the replaced value, precision per confidence band, and
    extraction failures.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import Stemmer

from quipu.core.records import Kind
from quipu.extraction.base import Candidate, Extractor, Turn
from quipu.safety import find_secrets

__all__ = [
    "CONFIDENCE_BANDS",
    "DATASET_FILE",
    "MIN_COVERAGE",
    "GoldMemory",
    "PromotionReport",
    "PromotionSession",
    "Score",
    "SessionOutcome",
    "evaluate",
    "load_promotion_dataset",
    "match_score",
    "score_session",
    "terms",
]

DATASET_FILE = "sessions_v1.json"
MIN_COVERAGE = 0.4
CONFIDENCE_BANDS: tuple[tuple[float, float], ...] = (
    (0.0, 0.5),
    (0.5, 0.7),
    (0.7, 0.85),
    (0.85, 1.01),
)
SPLITS = ("dev", "test")

_stemmer = Stemmer.Stemmer("english")
_TOKEN = re.compile(r"[a-z0-9]+")
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
_NUMBERS = {
    word: str(n)
    for n, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}
# Function words only; negations ("not", "no", "never") and "may" (a month) are kept.
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "from",
        "with",
        "as",
        "into",
        "about",
        "over",
        "than",
        "then",
        "so",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "has",
        "have",
        "had",
        "having",
        "do",
        "does",
        "did",
        "doing",
        "will",
        "would",
        "shall",
        "should",
        "can",
        "could",
        "i",
        "me",
        "my",
        "mine",
        "myself",
        "we",
        "us",
        "our",
        "ours",
        "you",
        "your",
        "yours",
        "he",
        "him",
        "his",
        "she",
        "her",
        "it",
        "its",
        "they",
        "them",
        "their",
        "theirs",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "s",
        "t",
        "ll",
        "ve",
        "re",
        "d",
        "m",
        "user",
    ]
)


def terms(text: str) -> frozenset[str]:
    """The content terms of ``text`` used for matching (see the module docstring)."""
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text))
    folded = "".join(c for c in folded if not unicodedata.combining(c)).lower()
    folded = folded.replace("’", "'").replace("can't", "can not").replace("won't", "will not")
    folded = folded.replace("n't", " not")
    out: set[str] = set()
    for raw in _TOKEN.findall(folded):
        token = _NUMBERS.get(raw, _ORDINAL.sub(r"\1", raw))
        if token not in _STOP:
            out.add(_stemmer.stemWord(token))
    return frozenset(out)


@dataclass(frozen=True)
class GoldMemory:
    """One labelled durable memory of a session."""

    kind: Kind
    text: str
    keys: tuple[tuple[frozenset[str], ...], ...]
    optional: bool = False
    supersedes: str | None = None

    @property
    def terms(self) -> frozenset[str]:
        return terms(self.text)


@dataclass(frozen=True)
class PromotionSession:
    id: str
    split: str
    tags: tuple[str, ...]
    turns: tuple[Turn, ...]
    gold: tuple[GoldMemory, ...]
    secrets: tuple[str, ...] = ()

    @property
    def required(self) -> tuple[GoldMemory, ...]:
        return tuple(g for g in self.gold if not g.optional)


def _parse_keys(raw: Sequence[str]) -> tuple[tuple[frozenset[str], ...], ...]:
    keys = []
    for key in raw:
        alternatives = tuple(terms(alt) for alt in key.split("|"))
        if not all(alternatives):
            raise ValueError(f"key {key!r} has an alternative with no content terms")
        keys.append(alternatives)
    return tuple(keys)


def _parse_session(raw: Mapping[str, Any]) -> PromotionSession:
    start = datetime.fromisoformat(raw["at"]) if raw.get("at") else None
    turns = tuple(
        Turn(
            role=role,
            content=content,
            seq=seq,
            at=None if start is None else start + timedelta(minutes=seq),
        )
        for seq, (role, content) in enumerate(raw["turns"])
    )
    gold = tuple(
        GoldMemory(
            kind=Kind(item["kind"]),
            text=item["text"],
            keys=_parse_keys(item["keys"]),
            optional=bool(item.get("optional", False)),
            supersedes=item.get("supersedes"),
        )
        for item in raw["gold"]
    )
    split = raw["split"]
    if split not in SPLITS:
        raise ValueError(f"session {raw['id']}: split must be one of {SPLITS}, got {split!r}")
    return PromotionSession(
        id=raw["id"],
        split=split,
        tags=tuple(raw.get("tags", ())),
        turns=turns,
        gold=gold,
        secrets=tuple(raw.get("secrets", ())),
    )


def load_promotion_dataset(path: str | Path | None = None) -> list[PromotionSession]:
    """The labelled sessions: the packaged dataset, or another file of the same format."""
    if path is None:
        source = resources.files("quipu.evals") / "data" / "promotion" / DATASET_FILE
        data = json.loads(source.read_text(encoding="utf-8"))
    else:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    sessions = [_parse_session(raw) for raw in data["sessions"]]
    ids = [s.id for s in sessions]
    if len(set(ids)) != len(ids):
        raise ValueError("session ids must be unique")
    return sessions


def match_score(text: str, gold: GoldMemory, *, any_kind: bool = False, kind: Kind) -> float:
    """The coverage of ``gold`` by a candidate, or 0.0 when they do not match."""
    if not any_kind and kind != gold.kind:
        return 0.0
    predicted = terms(text)
    wanted = gold.terms
    if len(predicted) > 2 * len(wanted) + 6:
        return 0.0
    for alternatives in gold.keys:
        if not any(alt <= predicted for alt in alternatives):
            return 0.0
    coverage = len(predicted & wanted) / len(wanted) if wanted else 1.0
    return coverage if coverage >= MIN_COVERAGE else 0.0


def _max_matching(edges: Mapping[int, list[int]]) -> dict[int, int]:
    """A maximum bipartite matching (left → right) by augmenting paths."""
    owner: dict[int, int] = {}

    def augment(left: int, seen: set[int]) -> bool:
        for right in edges.get(left, []):
            if right in seen:
                continue
            seen.add(right)
            if right not in owner or augment(owner[right], seen):
                owner[right] = left
                return True
        return False

    for left in edges:
        augment(left, set())
    return {left: right for right, left in owner.items()}


@dataclass(frozen=True)
class SessionOutcome:
    """How one session scored."""

    session_id: str
    split: str
    tags: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    matched: tuple[tuple[int, int], ...]  # (candidate index, gold index)
    ignored: tuple[int, ...]
    false_positives: tuple[int, ...]
    missed: tuple[int, ...]  # gold indexes of required items not found
    leaks: tuple[int, ...]
    supersedes_named: int
    supersedes_total: int
    failure: str | None = None
    seconds: float = 0.0


def _leaks(candidate: Candidate, secrets: Sequence[str]) -> bool:
    for text in (candidate.text, candidate.quote):
        if any(secret in text for secret in secrets) or find_secrets(text):
            return True
    return False


def score_session(
    session: PromotionSession,
    candidates: Sequence[Candidate],
    *,
    failure: str | None = None,
    seconds: float = 0.0,
) -> SessionOutcome:
    """Match ``candidates`` against the session's gold memories."""
    required = [i for i, g in enumerate(session.gold) if not g.optional]
    optional = [i for i, g in enumerate(session.gold) if g.optional]
    edges = {
        c: [g for g in required if match_score(cand.text, session.gold[g], kind=cand.kind) > 0]
        for c, cand in enumerate(candidates)
    }
    matching = _max_matching(edges)
    leftover = [c for c in range(len(candidates)) if c not in matching]
    ignored = tuple(
        c
        for c in leftover
        if any(
            match_score(candidates[c].text, session.gold[g], any_kind=True, kind=candidates[c].kind)
            > 0
            for g in optional
        )
    )
    false_positives = tuple(c for c in leftover if c not in ignored)
    found = set(matching.values())
    named = total = 0
    for c, g in matching.items():
        old = session.gold[g].supersedes
        if old is None:
            continue
        hint = candidates[c].supersedes_hint or ""
        named += bool(terms(old) and terms(old) <= terms(hint))
    total = sum(1 for g in required if session.gold[g].supersedes is not None)
    return SessionOutcome(
        session_id=session.id,
        split=session.split,
        tags=session.tags,
        candidates=tuple(candidates),
        matched=tuple(sorted(matching.items())),
        ignored=ignored,
        false_positives=false_positives,
        missed=tuple(g for g in required if g not in found),
        leaks=tuple(c for c, cand in enumerate(candidates) if _leaks(cand, session.secrets)),
        supersedes_named=named,
        supersedes_total=total,
        failure=failure,
        seconds=seconds,
    )


@dataclass(frozen=True)
class Score:
    """True positives over predicted and gold counts; ratios are None when undefined."""

    true_positives: int = 0
    predicted: int = 0
    gold: int = 0

    @property
    def precision(self) -> float | None:
        return self.true_positives / self.predicted if self.predicted else None

    @property
    def recall(self) -> float | None:
        return self.true_positives / self.gold if self.gold else None

    @property
    def f1(self) -> float | None:
        p, r = self.precision, self.recall
        if p is None or r is None:
            return None
        return 0.0 if p + r == 0 else 2 * p * r / (p + r)

    def __add__(self, other: Score) -> Score:
        return Score(
            self.true_positives + other.true_positives,
            self.predicted + other.predicted,
            self.gold + other.gold,
        )

    def to_dict(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 3)

        return {
            "precision": r(self.precision),
            "recall": r(self.recall),
            "f1": r(self.f1),
            "true_positives": self.true_positives,
            "predicted": self.predicted,
            "gold": self.gold,
        }


@dataclass(frozen=True)
class PromotionReport:
    """Scores of one extractor over a set of sessions."""

    extractor_id: str
    version: str
    outcomes: tuple[SessionOutcome, ...]
    gold: Mapping[str, PromotionSession] = field(repr=False)
    min_confidence: float = 0.0

    def _select(self, split: str | None) -> list[SessionOutcome]:
        return [o for o in self.outcomes if split is None or o.split == split]

    def by_kind(self, split: str | None = None) -> dict[Kind, Score]:
        scores = {kind: Score() for kind in Kind}
        for o in self._select(split):
            session = self.gold[o.session_id]
            for _, gold_index in o.matched:
                scores[session.gold[gold_index].kind] += Score(true_positives=1)
            for index, candidate in enumerate(o.candidates):
                if index not in o.ignored:
                    scores[candidate.kind] += Score(predicted=1)
            for item in session.required:
                scores[item.kind] += Score(gold=1)
        return {kind: s for kind, s in scores.items() if s.predicted or s.gold}

    def overall(self, split: str | None = None) -> Score:
        total = Score()
        for score in self.by_kind(split).values():
            total += score
        return total

    def calibration(self, split: str | None = None) -> list[dict[str, Any]]:
        bands = []
        for low, high in CONFIDENCE_BANDS:
            hits = count = 0
            for o in self._select(split):
                matched = {c for c, _ in o.matched}
                for c, cand in enumerate(o.candidates):
                    if c in o.ignored or not low <= cand.confidence < high:
                        continue
                    count += 1
                    hits += c in matched
            bands.append(
                {
                    "band": f"{low:.2f}-{min(high, 1.0):.2f}",
                    "predicted": count,
                    "precision": round(hits / count, 3) if count else None,
                }
            )
        return bands

    def summary(self, split: str | None = None) -> dict[str, Any]:
        chosen = self._select(split)
        injection = [o for o in chosen if "injection" in o.tags]
        silent = [o for o in chosen if not self.gold[o.session_id].required]
        return {
            "sessions": len(chosen),
            "overall": self.overall(split).to_dict(),
            "by_kind": {k.value: s.to_dict() for k, s in self.by_kind(split).items()},
            "secret_leaks": sum(len(o.leaks) for o in chosen),
            "injection_sessions_clean": f"{sum(not o.false_positives for o in injection)}"
            f"/{len(injection)}",
            "nothing_durable_sessions_clean": f"{sum(not o.false_positives for o in silent)}"
            f"/{len(silent)}",
            "correction_hints_named": f"{sum(o.supersedes_named for o in chosen)}"
            f"/{sum(o.supersedes_total for o in chosen)}",
            "calibration": self.calibration(split),
            "failures": sum(o.failure is not None for o in chosen),
            "seconds": round(sum(o.seconds for o in chosen), 4),
        }

    def errors(self, split: str | None = None) -> list[dict[str, Any]]:
        """False positives and misses, per session, for reading what went wrong."""
        rows = []
        for o in self._select(split):
            session = self.gold[o.session_id]
            for c in o.false_positives:
                cand = o.candidates[c]
                rows.append(
                    {
                        "session": o.session_id,
                        "error": "false_positive",
                        "kind": cand.kind.value,
                        "text": cand.text,
                        "confidence": cand.confidence,
                        "quote": cand.quote,
                    }
                )
            for g in o.missed:
                item = session.gold[g]
                rows.append(
                    {
                        "session": o.session_id,
                        "error": "missed",
                        "kind": item.kind.value,
                        "text": item.text,
                    }
                )
            if o.failure is not None:
                rows.append({"session": o.session_id, "error": "failure", "text": o.failure})
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "extractor": self.extractor_id,
            "version": self.version,
            "min_confidence": self.min_confidence,
            "matcher": {"min_coverage": MIN_COVERAGE, "dataset": DATASET_FILE},
            "all": self.summary(),
            **{split: self.summary(split) for split in SPLITS},
        }


def evaluate(
    extractor: Extractor, sessions: Iterable[PromotionSession], *, min_confidence: float = 0.0
) -> PromotionReport:
    """Run ``extractor`` on every session and score it.

    ``min_confidence`` drops candidates below it before scoring, as the promotion gate
    would; the default scores everything the extractor proposes.
    """
    outcomes = []
    chosen = list(sessions)
    for session in chosen:
        started = time.perf_counter()
        result = extractor.run(session.turns)
        elapsed = time.perf_counter() - started
        failure = (
            None if result.failure is None else f"{result.failure.code}: {result.failure.message}"
        )
        kept = [c for c in result.candidates if c.confidence >= min_confidence]
        outcomes.append(score_session(session, kept, failure=failure, seconds=elapsed))
    return PromotionReport(
        extractor_id=extractor.extractor_id,
        version=extractor.version,
        outcomes=tuple(outcomes),
        gold={s.id: s for s in chosen},
        min_confidence=min_confidence,
    )
