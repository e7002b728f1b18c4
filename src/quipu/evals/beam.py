"""BEAM's chats as a message-level evidence-retrieval benchmark (EVAL-3).

BEAM (Tavakoli et al., "Beyond a Million Tokens: Benchmarking and Enhancing Long-Term Memory
in LLMs", 2025; github.com/mohammadtavakoli78/BEAM) holds long user-assistant chats, many of
them technical (a developer building a Flask budget tracker, a weather app in JavaScript,
probability homework), with probing questions whose evidence is named message by message.
Its 100K split has 20 chats and 5,732 messages; 355 of its 400 probing questions name
evidence (abstention questions and five with an empty list do not).

The data is never fetched or shipped: pass the folder that holds the numbered chat folders
(``chats/100K`` of the repository), each with

* ``chat.json``: a list of batches ``{batch_number, turns}``; ``turns`` is a list of
  exchanges, each a list of messages ``{role, id, content, ...}``. Message ids are unique
  within a chat. A batch's date, ``time_anchor``, is on the batch or (where that is null) on its
  first user message.
* ``probing_questions/probing_questions.json``: category -> list of questions
  ``{question, source_chat_ids, ...}``; ``source_chat_ids`` is a list of message ids, a list
  that nests lists of ids, or an object of such lists (``first_statement``/``second_statement``,
  ``original_info``/``updated_info``, ...). Every id anywhere in it is evidence.

One haystack per chat. Every message is a turn (user and assistant alike, as an agent that
remembers every message would), its session the batch (``batch_<n>``) dated by its
``time_anchor`` (``"March-15-2024"``, read as UTC midnight). The generator left an index
marker at the end of most user messages (``"... ->-> 1,1"``): it is cut off, since no agent
would store it. Scoring is at message level: the harness's ``turn`` metrics.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from quipu.evals.datasets import DatasetFormatError
from quipu.evals.public_bench import Haystack, Query, Turn

__all__ = ["beam_haystacks", "evidence_ids", "strip_marker"]

CHAT_FILE = "chat.json"
QUESTIONS_FILE = Path("probing_questions") / "probing_questions.json"
_MARKER = re.compile(r"\s*->->[\d,\s]*\)?\s*$")


def strip_marker(text: str) -> str:
    """``text`` without the generator's trailing ``->-> <batch>,<turn>`` index marker."""
    return _MARKER.sub("", text)


def evidence_ids(raw: Any, where: str) -> list[int]:
    """Every message id in a ``source_chat_ids`` value (a list, nested lists, or an object of
    lists), in order, each once; ``None`` is no evidence."""
    found: list[int] = []

    def walk(value: Any) -> Iterator[int]:
        if isinstance(value, bool):
            raise DatasetFormatError(f"{where}: source_chat_ids holds a boolean")
        if isinstance(value, int):
            yield value
        elif isinstance(value, list):
            for item in value:
                yield from walk(item)
        elif isinstance(value, dict):
            for item in value.values():
                yield from walk(item)
        elif value is not None:
            raise DatasetFormatError(f"{where}: source_chat_ids holds {type(value).__name__}")

    for ident in walk(raw):
        if ident not in found:
            found.append(ident)
    return found


def beam_haystacks(path: str | Path, limit: int | None = None) -> list[Haystack]:
    """One haystack per chat folder under ``path`` (numbered folders in numeric order), with
    its questions that name evidence; the first ``limit`` such questions when given."""
    root = Path(path)
    if not root.is_dir():
        raise DatasetFormatError(f"{root}: not a folder of BEAM chats")
    folders = sorted(
        (child for child in root.iterdir() if child.is_dir() and child.name.isdigit()),
        key=lambda child: int(child.name),
    )
    if not folders:
        raise DatasetFormatError(f"{root}: no numbered chat folders (BEAM's chats/100K)")
    haystacks: list[Haystack] = []
    left = limit
    for folder in folders:
        if left is not None and left <= 0:
            break
        haystack = _chat(folder)
        queries = haystack.queries if left is None else haystack.queries[:left]
        if left is not None:
            left -= len(queries)
        if queries:
            haystacks.append(Haystack(haystack.haystack_id, haystack.turns, queries))
    return haystacks


def _chat(folder: Path) -> Haystack:
    chat_id = f"beam-{folder.name}"
    batches = _read(folder / CHAT_FILE)
    if not isinstance(batches, list):
        raise DatasetFormatError(f"{folder / CHAT_FILE}: expected a list of batches")
    turns: list[Turn] = []
    session_of: dict[int, str] = {}
    for position, batch in enumerate(batches):
        where = f"{folder / CHAT_FILE}[{position}]"
        if not isinstance(batch, dict) or not isinstance(batch.get("turns"), list):
            raise DatasetFormatError(f"{where}: expected a batch with a list of turns")
        session = f"batch_{batch.get('batch_number', position + 1)}"
        observed = _anchor(_time_anchor(batch), where)
        for exchange in batch["turns"]:
            if not isinstance(exchange, list):
                raise DatasetFormatError(f"{where}: an exchange is not a list of messages")
            for message in exchange:
                ident, text = _message(message, where)
                if ident in session_of:
                    raise DatasetFormatError(f"{where}: message id {ident} repeats")
                session_of[ident] = session
                if text:
                    turns.append(Turn(str(ident), session, text, observed))
    return Haystack(chat_id, tuple(turns), tuple(_questions(folder, chat_id, session_of)))


def _questions(folder: Path, chat_id: str, session_of: dict[int, str]) -> Iterator[Query]:
    source = folder / QUESTIONS_FILE
    probing = _read(source)
    if not isinstance(probing, dict):
        raise DatasetFormatError(f"{source}: expected an object of categories")
    for category, questions in probing.items():
        if not isinstance(questions, list):
            raise DatasetFormatError(f"{source}: {category!r} is not a list")
        for number, item in enumerate(questions):
            where = f"{source}: {category}[{number}]"
            if not isinstance(item, dict) or not isinstance(item.get("question"), str):
                raise DatasetFormatError(f"{where}: expected an object with a question")
            gold = evidence_ids(item.get("source_chat_ids"), where)
            unknown = [ident for ident in gold if ident not in session_of]
            if unknown:
                raise DatasetFormatError(f"{where}: no message with id {unknown[0]}")
            if not gold:
                continue
            yield Query(
                question_id=f"{chat_id}/{category}/{number}",
                category=category,
                text=item["question"],
                gold_sessions=frozenset(session_of[ident] for ident in gold),
                gold_turns=frozenset(str(ident) for ident in gold),
            )


def _message(message: Any, where: str) -> tuple[int, str]:
    if not isinstance(message, dict):
        raise DatasetFormatError(f"{where}: a message is not an object")
    ident, content = message.get("id"), message.get("content")
    if isinstance(ident, bool) or not isinstance(ident, int):
        raise DatasetFormatError(f"{where}: a message has no integer id")
    if not isinstance(content, str):
        raise DatasetFormatError(f"{where}: message {ident} has no text")
    return ident, strip_marker(content).strip()


def _time_anchor(batch: dict[str, Any]) -> Any:
    """The batch's ``time_anchor``, or the first one a message of it carries."""
    if batch.get("time_anchor") is not None:
        return batch["time_anchor"]
    for exchange in batch["turns"]:
        for message in exchange if isinstance(exchange, list) else ():
            if isinstance(message, dict) and message.get("time_anchor") is not None:
                return message["time_anchor"]
    return None


def _anchor(value: Any, where: str) -> datetime:
    if not isinstance(value, str):
        raise DatasetFormatError(f"{where}: no time_anchor")
    try:
        return datetime.strptime(value, "%B-%d-%Y").replace(tzinfo=UTC)
    except ValueError:
        raise DatasetFormatError(f"{where}: time_anchor {value!r} is not Month-DD-YYYY") from None


def _read(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as handle:
            return json.load(handle)
    except OSError as error:
        raise DatasetFormatError(f"{path}: cannot be read ({error.strerror})") from None
    except json.JSONDecodeError as error:
        raise DatasetFormatError(f"{path}: not valid JSON: {error}") from None
