"""The synthetic retrieval eval's corpus (:mod:`quipu.evals.synthetic`) as written and as
loaded: conversations, queries and sealed judgements, and the three JSON files that hold them
(``json.dumps(sort_keys=True, indent=2)`` plus a newline, so a seed gives the same bytes)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from quipu.evals.datasets import DatasetFormatError

FORMAT = "quipu-synthetic-retrieval"
VERSION = 1
CORPUS_FILE = "corpus.json"
QUERIES_FILE = "queries.json"
QRELS_FILE = "qrels.json"
TIERS: tuple[str, ...] = (
    "exact",
    "paraphrase",
    "adversarial_paraphrase",
    "supersession",
    "contradiction",
    "stale",
    "implicit_preference",
    "injection",
)


# --------------------------------------------------------------------------------------
# The corpus, as written and as loaded
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChatTurn:
    turn_id: str
    speaker: str
    text: str
    observed_at: datetime

    @property
    def indexed_text(self) -> str:
        """What a memory store is given: ``"<speaker>: <text>"`` (as the LoCoMo harness)."""
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True)
class ChatSession:
    session_id: str
    started_at: datetime
    turns: tuple[ChatTurn, ...]


@dataclass(frozen=True)
class ChatConversation:
    conversation_id: str
    user: str
    sessions: tuple[ChatSession, ...]

    def turns(self) -> list[tuple[ChatSession, ChatTurn]]:
        return [(session, turn) for session in self.sessions for turn in session.turns]


@dataclass(frozen=True)
class EvalQuery:
    """A query as the search path sees it: nothing here says what is relevant."""

    query_id: str
    conversation_id: str
    text: str
    as_of: datetime | None = None


@dataclass(frozen=True)
class Judgement:
    """The sealed relevance judgement of one query."""

    query_id: str
    conversation_id: str
    tier: str
    variant: str
    relevant: Mapping[str, int]
    """Turn id -> grade: 3 the answer, 2 supporting evidence, 1 a repeat of the answer."""
    must_not_rank_above: tuple[str, ...]
    """Turns that must not rank above the answer: superseded, stale, wrong or injected."""
    answer: str


@dataclass(frozen=True)
class SyntheticCorpus:
    seed: int
    conversations: tuple[ChatConversation, ...]
    queries: tuple[EvalQuery, ...]
    judgements: tuple[Judgement, ...]

    def tier_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(TIERS, 0)
        for judgement in self.judgements:
            counts[judgement.tier] += 1
        return counts


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------


def _iso(value: datetime) -> str:
    return value.isoformat(timespec="seconds")


def _header(seed: int) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "seed": seed}


def _corpus_json(corpus: SyntheticCorpus) -> dict[str, Any]:
    return _header(corpus.seed) | {
        "conversations": [
            {
                "conversation_id": chat.conversation_id,
                "user": chat.user,
                "sessions": [
                    {
                        "session_id": session.session_id,
                        "started_at": _iso(session.started_at),
                        "turns": [
                            {
                                "turn_id": turn.turn_id,
                                "speaker": turn.speaker,
                                "text": turn.text,
                                "observed_at": _iso(turn.observed_at),
                            }
                            for turn in session.turns
                        ],
                    }
                    for session in chat.sessions
                ],
            }
            for chat in corpus.conversations
        ]
    }


def _queries_json(corpus: SyntheticCorpus) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for query in corpus.queries:
        row = {
            "query_id": query.query_id,
            "conversation_id": query.conversation_id,
            "text": query.text,
        }
        if query.as_of is not None:
            row["as_of"] = _iso(query.as_of)
        rows.append(row)
    return _header(corpus.seed) | {"queries": rows}


def _qrels_json(corpus: SyntheticCorpus) -> dict[str, Any]:
    return _header(corpus.seed) | {
        "tiers": corpus.tier_counts(),
        "qrels": {
            j.query_id: {
                "conversation_id": j.conversation_id,
                "tier": j.tier,
                "variant": j.variant,
                "relevant": dict(j.relevant),
                "must_not_rank_above": list(j.must_not_rank_above),
                "answer": j.answer,
            }
            for j in corpus.judgements
        },
    }


def write_corpus(corpus: SyntheticCorpus, out: str | Path) -> list[Path]:
    """Write the three files into ``out`` (created if missing); returns their paths."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, data in (
        (CORPUS_FILE, _corpus_json(corpus)),
        (QUERIES_FILE, _queries_json(corpus)),
        (QRELS_FILE, _qrels_json(corpus)),
    ):
        path = folder / name
        text = json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
        path.write_text(text, encoding="utf-8", newline="\n")
        written.append(path)
    return written


def _document(folder: str | Path, name: str) -> dict[str, Any]:
    path = Path(folder) / name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise DatasetFormatError(f"cannot read {path}: {error}") from error
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DatasetFormatError(f"{path} is not a {FORMAT} file")
    if data.get("version") != VERSION:
        raise DatasetFormatError(f"{path} has version {data.get('version')}, expected {VERSION}")
    return data


def _read(folder: str | Path, name: str, key: str, shape: type[list[Any] | dict[str, Any]]) -> Any:
    """The ``key`` member of one of the three files, checked to be a ``shape``."""
    body = _document(folder, name).get(key)
    if not isinstance(body, shape):
        raise DatasetFormatError(f"{name}: {key!r} must be a {shape.__name__}")
    return body


def corpus_seed(folder: str | Path) -> int:
    """The seed ``corpus.json`` was generated with."""
    seed = _document(folder, CORPUS_FILE).get("seed")
    if not isinstance(seed, int):
        raise DatasetFormatError(f"{CORPUS_FILE}: 'seed' must be an integer")
    return seed


def _instant(value: str, where: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError) as error:
        raise DatasetFormatError(f"{where}: bad date {value!r}") from error
    if parsed.tzinfo is None:
        raise DatasetFormatError(f"{where}: date {value!r} has no time zone")
    return parsed


def load_conversations(folder: str | Path) -> list[ChatConversation]:
    """The conversations of ``corpus.json``."""
    body = _read(folder, CORPUS_FILE, "conversations", list)
    try:
        chats = [
            ChatConversation(
                conversation_id=c["conversation_id"],
                user=c["user"],
                sessions=tuple(
                    ChatSession(
                        session_id=s["session_id"],
                        started_at=_instant(s["started_at"], s["session_id"]),
                        turns=tuple(
                            ChatTurn(
                                t["turn_id"],
                                t["speaker"],
                                t["text"],
                                _instant(t["observed_at"], t["turn_id"]),
                            )
                            for t in s["turns"]
                        ),
                    )
                    for s in c["sessions"]
                ),
            )
            for c in body
        ]
    except (KeyError, TypeError) as error:
        raise DatasetFormatError(f"{CORPUS_FILE}: malformed conversation ({error})") from error
    return chats


def load_queries(folder: str | Path) -> list[EvalQuery]:
    """The queries: id, conversation, text and ``as_of``; no relevance information."""
    body = _read(folder, QUERIES_FILE, "queries", list)
    try:
        return [
            EvalQuery(
                query_id=q["query_id"],
                conversation_id=q["conversation_id"],
                text=q["text"],
                as_of=_instant(q["as_of"], q["query_id"]) if "as_of" in q else None,
            )
            for q in body
        ]
    except (KeyError, TypeError) as error:
        raise DatasetFormatError(f"{QUERIES_FILE}: malformed query ({error})") from error


def load_qrels(folder: str | Path) -> dict[str, Judgement]:
    """The sealed judgements by query id. Read only after every search has run."""
    body = _read(folder, QRELS_FILE, "qrels", dict)
    try:
        return {
            query_id: Judgement(
                query_id=query_id,
                conversation_id=j["conversation_id"],
                tier=j["tier"],
                variant=j["variant"],
                relevant={turn: int(grade) for turn, grade in j["relevant"].items()},
                must_not_rank_above=tuple(j["must_not_rank_above"]),
                answer=j["answer"],
            )
            for query_id, j in body.items()
        }
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise DatasetFormatError(f"{QRELS_FILE}: malformed judgement ({error})") from error
