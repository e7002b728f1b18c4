"""Loaders for the public conversational-memory benchmarks: LoCoMo and LongMemEval.

Both loaders are pure: they read one JSON file (any file of the same format, by path) and
return plain frozen dataclasses. Nothing here ranks or scores; the retrieval protocols'
*who is gold* rules live beside the data they read (``LoCoMoQuestion.is_scored``,
``LMEQuestion.gold_sessions`` and friends) so every harness applies them the same way.

LoCoMo (snap-research/locomo)
    A file is a list of conversations. Each has ``sample_id``, ``conversation`` (with
    ``speaker_a``, ``speaker_b``, ``session_<n>`` turn lists and ``session_<n>_date_time``
    strings such as ``"1:56 pm on 8 May, 2023"``) and ``qa`` (``question``, ``answer``,
    ``category`` 1-5, ``evidence`` dialog ids ``D<session>:<turn>``). A turn that shares a
    photo carries ``blip_caption``; its indexed text is ``"<speaker>: <text> [image:
    <caption>]"``. Session dates carry no time zone and are read as UTC.

    Evidence ids are not all well formed. Each ``evidence`` string is searched for every
    ``D<session>:<turn>`` it holds, so that:

    * several ids in one string are split (``"D8:6; D9:17"``, ``"D9:1 D4:4 D4:6"``);
    * a stray colon after the ``D`` is tolerated (``"D:11:26"`` reads as ``D11:26``);
    * zero-padded numbers are normalised (``"D30:05"`` reads as ``D30:5``);
    * a fragment holding no ``session:turn`` pair (``"D"``) is dropped.

    An id naming a turn that the conversation does not hold (``D10:19`` in conv-42,
    ``D4:36`` in conv-47) is left out of ``evidence`` (the turn-level gold) but its session
    still counts in ``evidence_sessions`` when that session exists, as the protocol derives
    evidence sessions from the ``D<n>`` prefix alone. Every fragment that did not resolve
    to a turn is kept in ``unresolved_evidence`` so a report can show it.

LongMemEval (Wu et al., ICLR 2025)
    A file is a list of questions with ``question_id``, ``question_type``, ``question``,
    ``question_date`` (``"2023/05/30 (Tue) 23:40"``, read as UTC), ``answer``,
    ``answer_session_ids`` and the parallel lists ``haystack_session_ids``,
    ``haystack_dates`` and ``haystack_sessions`` (turns ``{role, content, has_answer?}``).
    Turn ids follow the official retrieval code: ``"<session_id>_<position>"`` with the
    1-based position among *all* turns of the session. A few haystacks repeat a session id
    (the repeats are identical copies); the repeat is kept in ``sessions`` but indexed once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from quipu.errors import InvalidInput

__all__ = [
    "Conversation",
    "DatasetFormatError",
    "LMEQuestion",
    "LMESession",
    "LMETurn",
    "LoCoMoQuestion",
    "LoCoMoSession",
    "LoCoMoTurn",
    "load_locomo",
    "load_longmemeval",
    "parse_evidence_ids",
    "parse_locomo_datetime",
    "parse_longmemeval_datetime",
]

LOCOMO_SCORED_CATEGORIES = frozenset({1, 2, 3, 4})
"""Categories with evidence (5 is adversarial: no evidence, not scored for retrieval)."""


class DatasetFormatError(InvalidInput):
    """A benchmark file does not have the documented format."""

    default_code = "dataset_format"


# --------------------------------------------------------------------------------------
# LoCoMo
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoCoMoTurn:
    """One dialog turn; ``text`` is what gets indexed."""

    turn_id: str
    """The dialog id, e.g. ``"D3:7"``."""
    session: int
    speaker: str
    text: str
    """``"<speaker>: <text>"``, plus ``" [image: <caption>]"`` when the turn shares a photo."""
    observed_at: datetime
    """The session's date and time, timezone-aware UTC."""
    image_caption: str | None = None


@dataclass(frozen=True)
class LoCoMoSession:
    number: int
    date_time: str
    """The date string as the file gives it."""
    observed_at: datetime


@dataclass(frozen=True)
class LoCoMoQuestion:
    question_id: str
    """``"<sample_id>/<n>"``, n counting the conversation's ``qa`` list from 1."""
    question: str
    answer: str | None
    """None for adversarial (category 5) questions, which carry ``adversarial_answer``."""
    category: int
    evidence: tuple[str, ...]
    """Normalised evidence turn ids that name a turn of the conversation, file order."""
    evidence_sessions: tuple[int, ...]
    """Sorted sessions of every parsed evidence id whose session exists."""
    raw_evidence: tuple[str, ...] = ()
    unresolved_evidence: tuple[str, ...] = ()
    """Evidence fragments that did not resolve to a turn of the conversation."""
    adversarial_answer: str | None = None

    @property
    def is_scored(self) -> bool:
        """Scored for retrieval: categories 1-4 with at least one evidence session."""
        return self.category in LOCOMO_SCORED_CATEGORIES and bool(self.evidence_sessions)


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[LoCoMoSession, ...]
    turns: tuple[LoCoMoTurn, ...]
    """Every turn, by session number then dialog order."""
    questions: tuple[LoCoMoQuestion, ...]

    def turn_to_session(self) -> dict[str, int]:
        return {turn.turn_id: turn.session for turn in self.turns}

    def scored_questions(self) -> list[LoCoMoQuestion]:
        return [question for question in self.questions if question.is_scored]


_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_LOCOMO_DATETIME = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+)\.?,?\s+(\d{4})\s*",
    re.IGNORECASE,
)
_SESSION_KEY = re.compile(r"session_(\d+)")
_EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")


def parse_locomo_datetime(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as a UTC datetime (the file gives no time zone)."""
    match = _LOCOMO_DATETIME.fullmatch(text)
    month = _MONTHS.get(match.group(5).lower()) if match else None
    if match is None or month is None:
        raise DatasetFormatError(f"unrecognised LoCoMo date {text!r}")
    hour = int(match.group(1))
    if not 1 <= hour <= 12:
        raise DatasetFormatError(f"unrecognised LoCoMo date {text!r}")
    hour = hour % 12 + (12 if match.group(3).lower() == "p" else 0)
    try:
        return datetime(
            int(match.group(6)),
            month,
            int(match.group(4)),
            hour,
            int(match.group(2)),
            tzinfo=UTC,
        )
    except ValueError as error:
        raise DatasetFormatError(f"unrecognised LoCoMo date {text!r}: {error}") from error


def parse_evidence_ids(raw: Sequence[str]) -> list[tuple[int, int]]:
    """Every ``(session, turn)`` pair the evidence strings hold, first-seen order, no repeats.

    Tolerates several ids per string, a stray colon after ``D`` and zero padding; fragments
    with no ``session:turn`` pair yield nothing. See the module docstring.
    """
    pairs: list[tuple[int, int]] = []
    for item in raw:
        for session, turn in _EVIDENCE_ID.findall(item):
            pair = (int(session), int(turn))
            if pair not in pairs:
                pairs.append(pair)
    return pairs


def load_locomo(path: str | Path) -> list[Conversation]:
    """Read a LoCoMo file (e.g. ``locomo10.json``) into conversations."""
    data = _read_json(path)
    if not isinstance(data, list):
        raise DatasetFormatError(f"{path}: expected a list of conversations")
    return [_locomo_conversation(item, f"{path}[{index}]") for index, item in enumerate(data)]


def _locomo_conversation(item: Any, where: str) -> Conversation:
    record = _mapping(item, where)
    sample_id = _text(record, "sample_id", where)
    where = f"{where} ({sample_id})"
    body = _mapping(_field(record, "conversation", where), f"{where}.conversation")

    numbers = sorted(
        int(match.group(1)) for key in body if (match := _SESSION_KEY.fullmatch(key)) is not None
    )
    sessions: list[LoCoMoSession] = []
    turns: list[LoCoMoTurn] = []
    for number in numbers:
        key = f"session_{number}"
        date_text = _text(body, f"{key}_date_time", where)
        session = LoCoMoSession(number, date_text, parse_locomo_datetime(date_text))
        sessions.append(session)
        raw_turns = _field(body, key, where)
        if not isinstance(raw_turns, list):
            raise DatasetFormatError(f"{where}: {key} is not a list of turns")
        for position, raw_turn in enumerate(raw_turns):
            turns.append(_locomo_turn(raw_turn, session, f"{where}.{key}[{position}]"))

    turn_ids = [turn.turn_id for turn in turns]
    if len(set(turn_ids)) != len(turn_ids):
        raise DatasetFormatError(f"{where}: repeated dialog ids")
    known_turns = set(turn_ids)
    known_sessions = set(numbers)

    raw_questions = _field(record, "qa", where)
    if not isinstance(raw_questions, list):
        raise DatasetFormatError(f"{where}: qa is not a list")
    questions = [
        _locomo_question(
            raw,
            f"{sample_id}/{index + 1}",
            known_turns,
            known_sessions,
            f"{where}.qa[{index}]",
        )
        for index, raw in enumerate(raw_questions)
    ]
    return Conversation(
        sample_id=sample_id,
        speaker_a=_text(body, "speaker_a", where),
        speaker_b=_text(body, "speaker_b", where),
        sessions=tuple(sessions),
        turns=tuple(turns),
        questions=tuple(questions),
    )


def _locomo_turn(item: Any, session: LoCoMoSession, where: str) -> LoCoMoTurn:
    record = _mapping(item, where)
    turn_id = _text(record, "dia_id", where)
    speaker = _text(record, "speaker", where).strip()
    said = _text(record, "text", where).strip()
    caption_value = record.get("blip_caption")
    caption = caption_value.strip() if isinstance(caption_value, str) else ""
    text = f"{speaker}: {said}" if said else f"{speaker}:"
    if caption:
        text = f"{text} [image: {caption}]"
    return LoCoMoTurn(
        turn_id=turn_id,
        session=session.number,
        speaker=speaker,
        text=text,
        observed_at=session.observed_at,
        image_caption=caption or None,
    )


def _locomo_question(
    item: Any,
    question_id: str,
    known_turns: set[str],
    known_sessions: set[int],
    where: str,
) -> LoCoMoQuestion:
    record = _mapping(item, where)
    category = _field(record, "category", where)
    if not isinstance(category, int) or isinstance(category, bool):
        raise DatasetFormatError(f"{where}: category is not an integer")
    raw_evidence = _field(record, "evidence", where)
    if not isinstance(raw_evidence, list) or not all(isinstance(e, str) for e in raw_evidence):
        raise DatasetFormatError(f"{where}: evidence is not a list of strings")

    evidence: list[str] = []
    sessions: set[int] = set()
    unresolved: list[str] = []
    for fragment in raw_evidence:
        pairs = parse_evidence_ids([fragment])
        if not pairs:
            unresolved.append(fragment)
        for session, turn in pairs:
            turn_id = f"D{session}:{turn}"
            if session in known_sessions:
                sessions.add(session)
            if turn_id in known_turns:
                if turn_id not in evidence:
                    evidence.append(turn_id)
            else:
                unresolved.append(turn_id)

    return LoCoMoQuestion(
        question_id=question_id,
        question=_text(record, "question", where),
        answer=_optional_answer(record.get("answer")),
        category=category,
        evidence=tuple(evidence),
        evidence_sessions=tuple(sorted(sessions)),
        raw_evidence=tuple(raw_evidence),
        unresolved_evidence=tuple(unresolved),
        adversarial_answer=_optional_answer(record.get("adversarial_answer")),
    )


# --------------------------------------------------------------------------------------
# LongMemEval
# --------------------------------------------------------------------------------------

USER_ROLE = "user"


@dataclass(frozen=True)
class LMETurn:
    turn_id: str
    """``"<session_id>_<position>"``, position counting all the session's turns from 1."""
    session_id: str
    role: str
    content: str
    has_answer: bool = False


@dataclass(frozen=True)
class LMESession:
    session_id: str
    date: str
    """The date string as the file gives it."""
    observed_at: datetime
    turns: tuple[LMETurn, ...]


@dataclass(frozen=True)
class LMEQuestion:
    question_id: str
    question_type: str
    question: str
    question_date: datetime
    answer: str
    answer_session_ids: tuple[str, ...]
    sessions: tuple[LMESession, ...]
    """The haystack, in file order (a repeated session id is kept here)."""

    @property
    def is_abstention(self) -> bool:
        return self.question_id.endswith("_abs")

    def indexed_turns(self) -> list[LMETurn]:
        """The turns the official retrieval protocol indexes: user turns only.

        Haystack order; a session id seen before (an identical repeat) is skipped.
        """
        seen: set[str] = set()
        turns: list[LMETurn] = []
        for session in self.sessions:
            if session.session_id in seen:
                continue
            seen.add(session.session_id)
            turns.extend(turn for turn in session.turns if turn.role == USER_ROLE)
        return turns

    def turn_to_session(self) -> dict[str, str]:
        """Indexed turn id -> its session id."""
        return {turn.turn_id: turn.session_id for turn in self.indexed_turns()}

    def gold_turns(self) -> frozenset[str]:
        """User turns with ``has_answer`` inside an answer session."""
        answer_sessions = set(self.answer_session_ids)
        return frozenset(
            turn.turn_id
            for turn in self.indexed_turns()
            if turn.has_answer and turn.session_id in answer_sessions
        )

    def gold_sessions(self) -> frozenset[str]:
        """Answer sessions holding at least one user turn with ``has_answer``."""
        sessions = self.turn_to_session()
        return frozenset(sessions[turn_id] for turn_id in self.gold_turns())

    def is_scored(self) -> bool:
        """Not an abstention question, and at least one gold session."""
        return not self.is_abstention and bool(self.gold_sessions())


_LME_DATETIME = re.compile(
    r"\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})\s*"
)


def parse_longmemeval_datetime(text: str) -> datetime:
    """``"2023/05/30 (Tue) 23:40"`` as a UTC datetime (the weekday is not checked)."""
    match = _LME_DATETIME.fullmatch(text)
    if match is None:
        raise DatasetFormatError(f"unrecognised LongMemEval date {text!r}")
    year, month, day, hour, minute = (int(group) for group in match.groups())
    try:
        return datetime(year, month, day, hour, minute, tzinfo=UTC)
    except ValueError as error:
        raise DatasetFormatError(f"unrecognised LongMemEval date {text!r}: {error}") from error


def load_longmemeval(path: str | Path) -> list[LMEQuestion]:
    """Read a LongMemEval file (``longmemeval_s*.json`` or a subset) into questions."""
    data = _read_json(path)
    if not isinstance(data, list):
        raise DatasetFormatError(f"{path}: expected a list of questions")
    return [_lme_question(item, f"{path}[{index}]") for index, item in enumerate(data)]


def _lme_question(item: Any, where: str) -> LMEQuestion:
    record = _mapping(item, where)
    question_id = _text(record, "question_id", where)
    where = f"{where} ({question_id})"
    session_ids = _string_list(record, "haystack_session_ids", where)
    dates = _string_list(record, "haystack_dates", where)
    raw_sessions = _field(record, "haystack_sessions", where)
    if not isinstance(raw_sessions, list):
        raise DatasetFormatError(f"{where}: haystack_sessions is not a list")
    if not len(session_ids) == len(dates) == len(raw_sessions):
        raise DatasetFormatError(
            f"{where}: haystack_session_ids, haystack_dates and haystack_sessions differ in length"
        )
    sessions = tuple(
        _lme_session(session_id, date, raw, f"{where}.haystack_sessions[{index}]")
        for index, (session_id, date, raw) in enumerate(
            zip(session_ids, dates, raw_sessions, strict=True)
        )
    )
    return LMEQuestion(
        question_id=question_id,
        question_type=_text(record, "question_type", where),
        question=_text(record, "question", where),
        question_date=parse_longmemeval_datetime(_text(record, "question_date", where)),
        answer=_answer(_field(record, "answer", where), where),
        answer_session_ids=tuple(_string_list(record, "answer_session_ids", where)),
        sessions=sessions,
    )


def _lme_session(session_id: str, date: str, raw: Any, where: str) -> LMESession:
    if not isinstance(raw, list):
        raise DatasetFormatError(f"{where}: a session is not a list of turns")
    turns: list[LMETurn] = []
    for position, item in enumerate(raw, start=1):
        turn_where = f"{where}[{position - 1}]"
        record = _mapping(item, turn_where)
        has_answer = record.get("has_answer", False)
        if not isinstance(has_answer, bool):
            raise DatasetFormatError(f"{turn_where}: has_answer is not a boolean")
        turns.append(
            LMETurn(
                turn_id=f"{session_id}_{position}",
                session_id=session_id,
                role=_text(record, "role", turn_where),
                content=_text(record, "content", turn_where),
                has_answer=has_answer,
            )
        )
    return LMESession(session_id, date, parse_longmemeval_datetime(date), tuple(turns))


# --------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------


def _read_json(path: str | Path) -> Any:
    try:
        with Path(path).open(encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise DatasetFormatError(f"{path}: not valid JSON: {error}") from error


def _mapping(item: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(item, dict):
        raise DatasetFormatError(f"{where}: expected an object")
    return item


def _field(record: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in record:
        raise DatasetFormatError(f"{where}: missing {key!r}")
    return record[key]


def _text(record: Mapping[str, Any], key: str, where: str) -> str:
    value = _field(record, key, where)
    if not isinstance(value, str):
        raise DatasetFormatError(f"{where}: {key!r} is not a string")
    return value


def _string_list(record: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = _field(record, key, where)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise DatasetFormatError(f"{where}: {key!r} is not a list of strings")
    return value


def _answer(value: Any, where: str) -> str:
    """Answers are strings, except a few bare numbers (``2022``): those become strings."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise DatasetFormatError(f"{where}: answer is not a string or number")
    return str(value)


def _optional_answer(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    return str(value)
