"""The vocabulary and templates of the synthetic retrieval eval (:mod:`quipu.evals.synthetic`):
the families of facts it plants, parsed once at import from ``data/synthetic/templates.txt``."""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class StableFamily:
    """A fact that does not change: stated once, asked in three tiers."""

    answer: str
    """The pool (and placeholder) holding the answer."""
    statements: tuple[tuple[str, str], ...]
    """(user statement, exact query reusing its words) pairs."""
    paraphrases: tuple[str, ...]
    adversarial: tuple[str, ...]
    echoes: tuple[str, ...]
    """Assistant replies repeating the value (graded 1)."""

    @property
    def pools(self) -> tuple[str, ...]:
        return placeholders([text for pair in self.statements for text in pair])


@dataclass(frozen=True)
class ChangeFamily:
    """A value replaced by another: supersession, contradiction (correction) or stale."""

    pool: str
    old: tuple[str, ...]
    new: tuple[str, ...]
    queries: tuple[str, ...]
    new_pool: str | None = None


@dataclass(frozen=True)
class PreferenceFamily:
    queries: tuple[str, ...]
    options: tuple[tuple[str, str, str], ...]
    """(answer, primary statement, supporting statement); neither names the answer."""


@dataclass(frozen=True)
class InjectionFamily:
    pool: str
    attr: str
    """How an injection names the attribute: "emergency contact", "bank"."""
    statements: tuple[str, ...]
    queries: tuple[str, ...]


# --------------------------------------------------------------------------------------
# Vocabulary and templates, written for this eval
#
# Kept as one text block, one template per line, so the vocabulary reads like the data it is
# and stays short; parsed once at import into the frozen families above. "## <kind> <name>"
# starts a block, "key: value" lines follow, an indented line continues the previous value.
# A placeholder names the pool it is filled from ({city}, {pet_name}, {person}); {name} is
# the user, {old}/{new} and {good}/{bad} the two values of a change or an injection.
# --------------------------------------------------------------------------------------


def _templates() -> str:
    """The template library (``data/synthetic/templates.txt``), shipped with the package."""
    source = resources.files("quipu.evals") / "data" / "synthetic" / "templates.txt"
    return source.read_text(encoding="utf-8")


@dataclass(frozen=True)
class _Block:
    kind: str
    name: str
    fields: tuple[tuple[str, str], ...]

    def all(self, key: str) -> tuple[str, ...]:
        return tuple(value for k, value in self.fields if k == key)

    def one(self, key: str, default: str | None = None) -> str:
        values = self.all(key)
        if len(values) == 1:
            return values[0]
        if not values and default is not None:
            return default
        raise ValueError(f"template block {self.kind} {self.name}: want one {key!r}")


def _parse_blocks(text: str) -> list[_Block]:
    blocks: list[tuple[str, str, list[tuple[str, str]]]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("## "):
            kind, _, name = line[3:].partition(" ")
            blocks.append((kind, name, []))
        elif line.startswith(" ") and blocks and blocks[-1][2]:
            fields = blocks[-1][2]
            key, value = fields[-1]
            joiner = "" if line.strip().startswith("|") else " "
            fields[-1] = (key, f"{value}{joiner}{line.strip()}")
        else:
            key, sep, value = line.partition(": ")
            if not sep or not blocks:
                raise ValueError(f"malformed template line {line!r}")
            blocks[-1][2].append((key, value))
    return [_Block(kind, name, tuple(fields)) for kind, name, fields in blocks]


def placeholders(templates: Sequence[str]) -> tuple[str, ...]:
    """Pool placeholders in order of first appearance (``{name}`` is the user, not a pool)."""
    found: list[str] = []
    for template in templates:
        for _, field_name, _, _ in string.Formatter().parse(template):
            if field_name and field_name != "name" and field_name not in found:
                found.append(field_name)
    return tuple(found)


def _library() -> dict[str, list[_Block]]:
    by_kind: dict[str, list[_Block]] = {}
    for block in _parse_blocks(_templates()):
        by_kind.setdefault(block.kind, []).append(block)
    return by_kind


def _change(block: _Block) -> ChangeFamily:
    return ChangeFamily(
        pool=block.one("pool"),
        old=block.all("old"),
        new=block.all("new"),
        queries=block.all("query"),
        new_pool=block.one("new_pool", "") or None,
    )


_LIBRARY = _library()
_PHRASINGS = {block.name: block.all("text") for block in _LIBRARY["phrasings"]}

POOLS: dict[str, tuple[str, ...]] = {
    block.name: tuple(value.strip() for value in block.one("values").split("|"))
    for block in _LIBRARY["pool"]
} | {
    "date": tuple(
        f"{day} of {month}"
        for month in ("January", "March", "April", "June", "August", "October", "December")
        for day in ("2nd", "5th", "9th", "14th", "17th", "21st", "26th", "28th")
    )
}
STABLE: tuple[StableFamily, ...] = tuple(
    StableFamily(
        answer=block.one("answer"),
        statements=tuple(zip(block.all("statement"), block.all("exact"), strict=True)),
        paraphrases=block.all("paraphrase"),
        adversarial=block.all("adversarial"),
        echoes=block.all("echo"),
    )
    for block in _LIBRARY["stable"]
)
SUPERSESSIONS = tuple(_change(block) for block in _LIBRARY["supersession"])
CONTRADICTIONS = tuple(_change(block) for block in _LIBRARY["contradiction"])
STALE = tuple(_change(block) for block in _LIBRARY["stale"])
PREFERENCES: tuple[PreferenceFamily, ...] = tuple(
    PreferenceFamily(
        queries=block.all("query"),
        options=tuple(
            zip(block.all("answer"), block.all("primary"), block.all("support"), strict=True)
        ),
    )
    for block in _LIBRARY["preference"]
)
INJECTION_FAMILIES: tuple[InjectionFamily, ...] = tuple(
    InjectionFamily(
        pool=block.one("pool"),
        attr=block.one("attr"),
        statements=block.all("statement"),
        queries=block.all("query"),
    )
    for block in _LIBRARY["injection"]
)
FILLER: tuple[tuple[str, str], ...] = tuple(
    (user, reply)
    for block in _LIBRARY["filler"]
    for user, reply in zip(block.all("user"), block.all("reply"), strict=True)
)
#: Pasted third-party text trying to plant a value; some match quipu.safety's screening
#: patterns (stored quarantined), some are phrased past them (stored active).
INJECTION_PHRASINGS = _PHRASINGS["injection"]
HARD_NEGATIVES = _PHRASINGS["negative"]
FACT_REPLIES = _PHRASINGS["fact_reply"]
CHANGE_REPLIES = _PHRASINGS["change_reply"]
CORRECTION_REPLIES = _PHRASINGS["correction_reply"]
PREFERENCE_REPLIES = _PHRASINGS["preference_reply"]
INJECTION_REPLIES = _PHRASINGS["injection_reply"]
ASSISTANT = "Assistant"
