"""A seeded generator of long technical chats with message-level evidence (EVAL-1, EVAL-3).

A developer builds a web app with an assistant over eight to ten sessions days apart: one
app (:data:`~quipu.evals.tech_domains.DOMAINS`) on one stack
(:data:`~quipu.evals.tech_code.STACKS`) per chat. Every message is remembered, and every
question names the messages that answer it. Planted in each chat, with the questions asked
about them (the category in brackets):

* the ORM models of the app's three entities, two of them asked about [``code``];
* two helper functions with a tricky edge case, asked by their identifier [``identifier``];
* three stack traces the developer pastes and the assistant's fix for each: both messages
  are the evidence [``error_fix``];
* three design decisions with their reasons [``decision``];
* two settings stated early and corrected in a later session: the statement and the
  correction are both evidence [``update``];
* three libraries added in three sessions, asked about together [``multi_session``];
* the ``docker-compose.yml`` the developer pastes [``config``].

Around them: the route handlers and tests of the same entities (code that names the same
tables and fields without answering), follow-ups that mention an error again, everyday
development questions with long answers, and small talk.

Splits. Chats alternate ``dev`` and ``test``, and the two splits ask their questions with
different templates (each category has a lexical and a paraphrased template per split, drawn
50/50). Tune on ``dev``; ``test`` chats and phrasings are held out.

Determinism: one ``random.Random(seed)``; no clock, no set iteration; one seed always writes
the same bytes (``json.dumps(sort_keys=True, indent=2)``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from quipu.evals.datasets import DatasetFormatError
from quipu.evals.public_bench import Haystack, Query, Turn
from quipu.evals.tech_code import (
    STACKS,
    Entity,
    Stack,
    helper_code,
    identifier,
    model_code,
    route_code,
    test_code,
)
from quipu.evals.tech_domains import CORRECTIONS, DECISIONS, DOMAINS, Domain
from quipu.evals.tech_errors import errors_for, fill, trace
from quipu.evals.tech_questions import ask
from quipu.evals.tech_talk import ENTITY_FILLERS, FILLERS, TAILS

__all__ = [
    "CATEGORIES",
    "DEFAULT_CHATS",
    "DEFAULT_SEED",
    "FILE",
    "SPLITS",
    "Chat",
    "Message",
    "Question",
    "Session",
    "TechCorpus",
    "generate",
    "load",
    "tech_haystacks",
    "write",
]

FORMAT = "quipu-technical-chats"
VERSION = 1
FILE = "technical_chats.json"
DEFAULT_CHATS = 20
DEFAULT_SEED = 31
SPLITS = ("dev", "test")
CATEGORIES = ("code", "identifier", "error_fix", "decision", "update", "multi_session", "config")
BASE_DATE = datetime(2024, 2, 5, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Message:
    message_id: int
    role: str
    text: str


@dataclass(frozen=True)
class Session:
    session_id: str
    date: datetime
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class Chat:
    chat_id: str
    split: str
    app: str
    stack: str
    sessions: tuple[Session, ...]


@dataclass(frozen=True)
class Question:
    question_id: str
    chat_id: str
    split: str
    category: str
    text: str
    evidence: tuple[int, ...]
    """Message ids of the chat that answer it."""


@dataclass(frozen=True)
class TechCorpus:
    seed: int
    chats: tuple[Chat, ...]
    questions: tuple[Question, ...]


# --------------------------------------------------------------------------------------
# Building one chat
# --------------------------------------------------------------------------------------


@dataclass
class _Block:
    """Consecutive messages of one session: (role, text, tag). A tag names a message a
    question points at."""

    messages: list[tuple[str, str, str | None]]
    topic: str


class _ChatBuilder:
    def __init__(self, rng: random.Random, index: int, domain: Domain, stack: Stack) -> None:
        self.rng = rng
        self.index = index
        self.domain = domain
        self.stack = stack
        self.split = SPLITS[index % 2]
        self.sessions = rng.randint(8, 10)
        self.plan: list[list[_Block]] = [[] for _ in range(self.sessions)]
        self.asked: list[tuple[str, str, list[str]]] = []
        """(category, question text, tags of its evidence)."""
        self._tags = 0

    def tail(self, text: str) -> str:
        """``text`` with zero to two of the assistant's closing paragraphs."""
        for extra in self.rng.sample(TAILS, self.rng.choice((0, 1, 1, 2))):
            text += f"\n\n{extra}"
        return text

    def tag(self) -> str:
        self._tags += 1
        return f"t{self._tags}"

    def put(self, session: int, block: _Block) -> None:
        self.plan[session].append(block)

    def question(self, category: str, values: dict[str, str], tags: list[str]) -> None:
        self.asked.append((category, ask(self.rng, category, self.split, values), tags))

    # -- the planted events -----------------------------------------------------------------
    def models(self) -> None:
        """Every entity's model early on; its routes and test later (same names, no answer);
        two models are asked about."""
        entities = list(self.domain.entities)
        asked = self.rng.sample(range(len(entities)), 2)
        for number, entity in enumerate(entities):
            session = self.rng.randint(0, 2)
            tag = self.tag()
            fields = _field_words(entity)
            self.put(session, _Block([
                ("user", f"Can you write the {entity.name} model? It needs {fields}.", None),
                ("assistant", f"Here's the {entity.name} model for {self.stack.name}:\n\n"
                 f"```{self.stack.model_fence}\n{model_code(self.stack, entity)}\n```\n\n"
                 f"{_model_note(self.rng, entity)} Then create the table:\n\n```\n"
                 f"{fill(self.stack.migrate, {'table': entity.table})}\n```\n\n"
                 + self.tail("If the table already holds rows, give any new required column a "
                             "default first, or the migration fails on the existing data."),
                 tag),
            ], f"the {entity.name} model"))  # fmt: skip
            later = self.rng.randint(session + 1, self.sessions - 1)
            self.put(later, _Block([
                ("user", f"Now the endpoints for {entity.table}, please: list and create.", None),
                ("assistant", "Here are both handlers:\n\n"
                 f"```{self.stack.fence}\n{route_code(self.stack, entity)}\n```\n\n"
                 "Both require a logged-in user; the list is newest first. Start the app with "
                 f"`{self.stack.run}` and try them with curl or the frontend. Invalid input "
                 "should come back as a 4xx with the field named, never a 500.", None),
            ], f"the {entity.table} endpoints"))  # fmt: skip
            self.put(self.rng.randint(later, self.sessions - 1), _Block([
                ("user", f"Could you add a test for creating a {entity.noun}?", None),
                ("assistant", f"Sure:\n\n```{self.stack.fence}\n"
                 f"{test_code(self.stack, entity)}\n```\n\nIt uses the auth fixture from the "
                 "other API tests.", None),
            ], f"tests for {entity.table}"))  # fmt: skip
            if number in asked:
                values = {"entity": entity.name, "noun": entity.noun, "table": entity.table}
                self.question("code", values, [tag])

    def helpers(self) -> None:
        for helper in self.domain.helpers:
            name = identifier(self.stack.language, helper.words)
            tag = self.tag()
            self.put(self.rng.randint(2, self.sessions - 1), _Block([
                ("user", f"I need a helper that {helper.purpose}.", None),
                ("assistant", f"Here's `{name}`:\n\n```{self.stack.fence}\n"
                 f"{helper_code(self.stack, helper)}\n```\n\nNote that when {helper.edge}, "
                 f"{helper.edge_result}. It has no side effects, so a handful of unit tests "
                 "covers it: the normal case, the edge case and a large value.", tag),
            ], f"a helper for {helper.purpose.split(' ', 1)[1]}"))  # fmt: skip
            self.question("identifier", {"name": name, "edge": helper.edge}, [tag])

    def errors(self) -> None:
        for family in self.rng.sample(errors_for(self.stack), 3):
            entity = self.rng.choice(self.domain.entities)
            words = [f for f in entity.fields if f.kind in ("str", "text")]
            field = self.rng.choice(words or [f for f in entity.fields if f.kind[:2] != "fk"])
            values = {
                "table": entity.table,
                "field": field.name,
                "field_go": identifier("go", tuple(field.name.split("_"))),
                "entity": entity.name,
                "noun": entity.noun,
                "port": str(self.rng.choice((3000, 5000, 5432, 8000, 8080))),
            }
            action = fill(family.action, values)
            pasted, fixed = self.tag(), self.tag()
            session = self.rng.randint(1, self.sessions - 1)
            opener = self.rng.choice(("I'm getting this error when", "This blows up when",
                                      "Stuck again: this happens when"))  # fmt: skip
            self.put(session, _Block([
                ("user", f"{opener} {action}:\n\n```\n"
                 f"{trace(self.stack, family, values, self.rng.randint(12, 140))}\n```", pasted),
                ("assistant", f"{fill(family.cause, values)}\n\nThe fix:\n\n"
                 f"```{self.stack.fence}\n{fill(family.fix, values)}\n```\n\n"
                 f"After that, {action} should give a proper response instead of a crash. "
                 + self.tail(f"Restart with `{self.stack.run}` and try it again; a regression "
                             "test that repeats exactly this request keeps it from coming "
                             "back."), fixed),
            ], f"the error when {action}"))  # fmt: skip
            if session + 1 < self.sessions and self.rng.random() < 0.5:
                self.put(self.rng.randint(session + 1, self.sessions - 1), _Block([
                    ("user", f"By the way, {fill(family.paraphrase, values)} has not come "
                     "back since the fix.", None),
                    ("assistant", "Good to hear. If it does, check the logs for the request "
                     "id first.", None),
                ], "a follow-up"))  # fmt: skip
            short = fill(family.short, values)
            said = {"short": short, "action": action, "paraphrase": fill(family.paraphrase, values)}
            self.question("error_fix", said, [pasted, fixed])

    def decisions(self) -> None:
        for decision in self.rng.sample(DECISIONS, 3):
            tag = self.tag()
            self.put(self.rng.randint(0, self.sessions - 1), _Block([
                ("user", f"Decision on {decision.aspect}: we're going with {decision.chosen} "
                 f"instead of {decision.rejected}, because {decision.reason}.", tag),
                ("assistant", f"Makes sense. {decision.chosen[0].upper()}"
                 f"{decision.chosen[1:]} it is; I'll assume that from now on.", None),
            ], decision.aspect))  # fmt: skip
            values = {
                "aspect": decision.aspect,
                "chosen": decision.chosen,
                "rejected": decision.rejected,
                "ask": decision.ask,
            }
            self.question("decision", values, [tag])

    def corrections(self) -> None:
        for correction in self.rng.sample(CORRECTIONS, 2):
            first = self.rng.randint(0, self.sessions // 2 - 1)
            second = self.rng.randint(first + 1, self.sessions - 1)
            old, new = self.tag(), self.tag()
            self.put(first, _Block([
                ("user", f"For the record: {correction.setting} is {correction.old}.", old),
                ("assistant", f"Noted: {correction.setting}, {correction.old}.", None),
            ], correction.setting))  # fmt: skip
            self.put(second, _Block([
                ("user", f"Change of plan on {correction.setting}: it's {correction.new} now, "
                 f"not {correction.old}, because {correction.reason}.", new),
                ("assistant", f"Updated: {correction.new} from now on.", None),
            ], correction.setting))  # fmt: skip
            values = {"setting": correction.setting, "ask": correction.ask}
            self.question("update", values, [old, new])

    def packages(self) -> None:
        chosen = self.rng.sample(self.stack.packages, 3)
        sessions = sorted(self.rng.sample(range(self.sessions), 3))
        tags: list[str] = []
        for (package, purpose), session in zip(chosen, sessions, strict=True):
            tag = self.tag()
            tags.append(tag)
            self.put(session, _Block([
                ("user", f"Let's add {package} for {purpose}.", tag),
                ("assistant", f"Good idea. Add `{package}` to the dependencies, then wire it up "
                 "where the app starts.", None),
            ], purpose))  # fmt: skip
        self.question("multi_session", {}, tags)

    def compose(self) -> None:
        image = self.rng.choice(("16.2", "15.6", "16.4", "17.0"))
        port = self.rng.choice(("5433", "5434", "55432"))
        redis = self.rng.choice(("7.2-alpine", "7.4-alpine", "6.2-alpine"))
        slug = self.domain.slug
        tag = self.tag()
        paste = (
            f"services:\n  db:\n    image: postgres:{image}\n    environment:\n"
            f"      POSTGRES_DB: {slug}\n      POSTGRES_HOST_AUTH_METHOD: trust\n"
            f'    ports:\n      - "{port}:5432"\n    volumes:\n      - pgdata:/var/lib/'
            f"postgresql/data\n  redis:\n    image: redis:{redis}\n    ports:\n"
            f'      - "6379:6379"\nvolumes:\n  pgdata:'
        )
        self.put(self.rng.randint(0, 1), _Block([
            ("user", f"Here's my docker-compose.yml so far:\n\n```yaml\n{paste}\n```\n\n"
             "Does it look right?", tag),
            ("assistant", "Looks fine for development. I'd add a healthcheck on the db service "
             "so the app waits until Postgres accepts connections.", None),
        ], "the local setup"))  # fmt: skip
        self.question("config", {"image": image, "port": port, "redis": redis}, [tag])

    def fillers(self) -> None:
        """Everyday questions: general ones (each at most once) and ones about an entity and
        field of the app (each combination at most once)."""
        pool = list(FILLERS)
        self.rng.shuffle(pool)
        used: set[tuple[int, str, str]] = set()
        for session in range(self.sessions):
            for _ in range(self.rng.randint(2, 4)):
                if pool:
                    question, answer = pool.pop()
                    self.put(
                        session,
                        _Block(
                            [("user", question, None), ("assistant", self.tail(answer), None)],
                            "a few general questions",
                        ),
                    )
            for _ in range(self.rng.randint(1, 3)):
                number = self.rng.randrange(len(ENTITY_FILLERS))
                entity = self.rng.choice(self.domain.entities)
                field = self.rng.choice(entity.fields).name
                if (number, entity.name, field) in used:
                    continue
                used.add((number, entity.name, field))
                values = {
                    "table": entity.table,
                    "field": field,
                    "noun": entity.noun,
                    "entity": entity.name,
                }
                question, answer = ENTITY_FILLERS[number]
                self.put(session, _Block([("user", fill(question, values), None),
                                          ("assistant", self.tail(fill(answer, values)), None)],
                                         f"the {entity.table}"))  # fmt: skip

    # -- assembling ------------------------------------------------------------------------
    def build(self) -> tuple[Chat, list[Question]]:
        for step in (self.compose, self.models, self.helpers, self.errors, self.decisions,
                     self.corrections, self.packages, self.fillers):  # fmt: skip
            step()
        chat_id = f"tech-{self.index + 1:02d}"
        sessions: list[Session] = []
        ids: dict[str, int] = {}
        next_id = 0
        day = BASE_DATE + timedelta(days=self.rng.randint(0, 300))
        for number, blocks in enumerate(self.plan):
            self.rng.shuffle(blocks)
            opener = blocks[0].topic if blocks else "the app"
            messages: list[tuple[str, str, str | None]] = [
                ("user", self.rng.choice(_OPENERS).format(app=self.domain.app, topic=opener),
                 None),
                ("assistant", self.rng.choice(_GREETINGS).format(topic=opener), None),
            ]  # fmt: skip
            for block in blocks:
                messages += block.messages
                if self.rng.random() < 0.4:
                    messages += [("user", self.rng.choice(_THANKS).format(topic=block.topic),
                                  None),
                                 ("assistant", self.rng.choice(_WELCOME).format(topic=block.topic),
                                  None)]  # fmt: skip
            rows: list[Message] = []
            for role, text, tag in messages:
                if tag is not None:
                    ids[tag] = next_id
                rows.append(Message(next_id, role, text))
                next_id += 1
            sessions.append(Session(f"session_{number + 1}", day, tuple(rows)))
            day += timedelta(days=self.rng.randint(2, 12), hours=self.rng.randint(-3, 3))
        chat = Chat(chat_id, self.split, self.domain.app, self.stack.name, tuple(sessions))
        questions = [
            Question(f"{chat_id}/{category}/{n}", chat_id, self.split, category, text,
                     tuple(ids[tag] for tag in tags))
            for n, (category, text, tags) in enumerate(self.asked)
        ]  # fmt: skip
        return chat, questions


_OPENERS = (
    "Hi again! Back to {app}. Today I'd like to look at {topic}.",
    "Morning. Continuing with {app}; first up is {topic}.",
    "Hey, I have an hour for {app}. Can we start with {topic}?",
    "Back at it. Next on my list for {app}: {topic}.",
)
_GREETINGS = (
    "Sure, let's pick up {topic} where we left off.",
    "Happy to look at {topic}. Paste whatever you have and we'll go from there.",
    "Of course. Let's take {topic} step by step.",
)
_THANKS = (
    "Thanks, that worked!",
    "Perfect, thank you. That settles {topic}.",
    "Great, {topic} is sorted then.",
    "Got it, thanks. Moving on from {topic}.",
)
_WELCOME = (
    "You're welcome!",
    "Glad it helped with {topic}.",
    "Anytime. What's next after {topic}?",
)


def _field_words(entity: Entity) -> str:
    words = [
        f"the {f.name.removesuffix('_id').replace('_', ' ')}"
        if f.kind.startswith("fk:")
        else f.name.replace("_", " ")
        for f in entity.fields
    ]
    return ", ".join(words[:-1]) + f" and {words[-1]}"


def _model_note(rng: random.Random, entity: Entity) -> str:
    money = [f.name for f in entity.fields if f.kind == "money"]
    if money:
        return f"I kept {money[0]} as integer cents so totals never round."
    required = entity.fields[0].name
    return rng.choice((
        f"I made {required} required; the rest have defaults.",
        "Run the migration afterwards so the table exists in your local database.",
        f"There's no unique constraint on {required} yet; add one if you need it.",
    ))  # fmt: skip


# --------------------------------------------------------------------------------------
# The corpus, its file, and the benchmark's haystacks
# --------------------------------------------------------------------------------------


def generate(seed: int = DEFAULT_SEED, chats: int = DEFAULT_CHATS) -> TechCorpus:
    """``chats`` chats (alternately dev and test) and their questions, from ``seed``."""
    if chats < 1:
        raise ValueError(f"chats must be at least 1, got {chats}")
    rng = random.Random(seed)
    domains = list(DOMAINS)
    rng.shuffle(domains)
    out_chats: list[Chat] = []
    out_questions: list[Question] = []
    for index in range(chats):
        domain = domains[index % len(domains)]
        stack = rng.choice(STACKS)
        chat, questions = _ChatBuilder(rng, index, domain, stack).build()
        out_chats.append(chat)
        out_questions += questions
    return TechCorpus(seed, tuple(out_chats), tuple(out_questions))


def _to_json(corpus: TechCorpus) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "seed": corpus.seed,
        "chats": [
            {
                "chat_id": chat.chat_id,
                "split": chat.split,
                "app": chat.app,
                "stack": chat.stack,
                "sessions": [
                    {
                        "session_id": session.session_id,
                        "date": session.date.isoformat(),
                        "messages": [
                            {"id": m.message_id, "role": m.role, "text": m.text}
                            for m in session.messages
                        ],
                    }
                    for session in chat.sessions
                ],
            }
            for chat in corpus.chats
        ],
        "questions": [
            {
                "question_id": q.question_id,
                "chat_id": q.chat_id,
                "split": q.split,
                "category": q.category,
                "question": q.text,
                "evidence": list(q.evidence),
            }
            for q in corpus.questions
        ],
    }


def write(corpus: TechCorpus, folder: str | Path) -> Path:
    """Write ``folder/technical_chats.json`` (same seed, same bytes) and return its path."""
    path = Path(folder) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_to_json(corpus), sort_keys=True, indent=2, ensure_ascii=False)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def load(path: str | Path) -> TechCorpus:
    """Read a file written by :func:`write` (or the folder holding it)."""
    source = Path(path)
    if source.is_dir():
        source = source / FILE
    try:
        raw = json.loads(source.read_text(encoding="utf-8"))
    except OSError as error:
        raise DatasetFormatError(f"{source}: cannot be read ({error.strerror})") from None
    except ValueError as error:
        raise DatasetFormatError(f"{source}: not valid JSON: {error}") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or raw.get("version") != VERSION:
        raise DatasetFormatError(f"{source}: not a {FORMAT} v{VERSION} file")
    try:
        chats = tuple(_chat(item) for item in raw["chats"])
        questions = tuple(
            Question(
                str(q["question_id"]), str(q["chat_id"]), str(q["split"]), str(q["category"]),
                str(q["question"]), tuple(int(i) for i in q["evidence"]),
            )
            for q in raw["questions"]
        )  # fmt: skip
        corpus = TechCorpus(int(raw["seed"]), chats, questions)
    except (KeyError, TypeError, ValueError) as error:
        raise DatasetFormatError(f"{source}: malformed ({error!r})") from None
    _check(corpus, source)
    return corpus


def _check(corpus: TechCorpus, source: Path) -> None:
    """Every question names its chat and messages of that chat; every date has a zone."""
    messages: dict[str, set[int]] = {}
    for chat in corpus.chats:
        for session in chat.sessions:
            if session.date.tzinfo is None:
                raise DatasetFormatError(f"{source}: {chat.chat_id} has a date without a zone")
        messages[chat.chat_id] = {m.message_id for s in chat.sessions for m in s.messages}
    for q in corpus.questions:
        known = messages.get(q.chat_id)
        if known is None:
            raise DatasetFormatError(f"{source}: {q.question_id} names no chat of the file")
        unknown = [i for i in q.evidence if i not in known]
        if unknown or not q.evidence:
            raise DatasetFormatError(f"{source}: {q.question_id} names no message {unknown[:1]}")


def _chat(item: dict[str, Any]) -> Chat:
    sessions = tuple(
        Session(
            str(s["session_id"]),
            datetime.fromisoformat(s["date"]),
            tuple(Message(int(m["id"]), str(m["role"]), str(m["text"])) for m in s["messages"]),
        )
        for s in item["sessions"]
    )
    return Chat(str(item["chat_id"]), str(item["split"]), str(item["app"]), str(item["stack"]),
                sessions)  # fmt: skip


def tech_haystacks(
    corpus: TechCorpus, split: str = "all", limit: int | None = None
) -> list[Haystack]:
    """One haystack per chat of ``split`` (``dev``, ``test`` or ``all``): every message a turn,
    its session the chat session; the first ``limit`` questions when given."""
    if split not in (*SPLITS, "all"):
        raise ValueError(f"split must be dev, test or all, got {split!r}")
    by_chat: dict[str, list[Question]] = {}
    for question in corpus.questions:
        by_chat.setdefault(question.chat_id, []).append(question)
    haystacks: list[Haystack] = []
    left = limit
    for chat in corpus.chats:
        if split not in ("all", chat.split):
            continue
        if left is not None and left <= 0:
            break
        session_of = {m.message_id: s.session_id for s in chat.sessions for m in s.messages}
        turns = tuple(
            Turn(str(m.message_id), s.session_id, m.text, s.date)
            for s in chat.sessions
            for m in s.messages
        )
        queries = [
            Query(
                question_id=q.question_id,
                category=q.category,
                text=q.text,
                gold_sessions=frozenset(session_of[i] for i in q.evidence),
                gold_turns=frozenset(str(i) for i in q.evidence),
            )
            for q in by_chat.get(chat.chat_id, [])
        ]
        if left is not None:
            queries = queries[:left]
            left -= len(queries)
        if queries:
            haystacks.append(Haystack(chat.chat_id, turns, tuple(queries)))
    return haystacks


def split_counts(questions: Sequence[Question]) -> dict[str, dict[str, int]]:
    """Questions per split and category."""
    out: dict[str, dict[str, int]] = {}
    for q in questions:
        row = out.setdefault(q.split, dict.fromkeys(CATEGORIES, 0))
        row[q.category] += 1
    return out
