"""What the technical-chat generator's developers build and decide
(:mod:`quipu.evals.tech_corpus`): apps with their entities and helpers, design decisions with
their reasons, and settings corrected later. Written for this eval, kept as text in
``data/tech/world.txt`` (its header describes the format) and parsed once at import."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from quipu.evals.tech_code import Entity, Field, Helper

__all__ = ["CORRECTIONS", "DECISIONS", "DOMAINS", "Correction", "Decision", "Domain"]


@dataclass(frozen=True)
class Domain:
    app: str
    """What is built: "a recipe-sharing site"."""
    slug: str
    entities: tuple[Entity, ...]
    helpers: tuple[Helper, ...]


@dataclass(frozen=True)
class Decision:
    aspect: str
    """What was decided, in words: "pagination"."""
    chosen: str
    rejected: str
    reason: str
    ask: str
    """The aspect in other words, for held-out questions: "how the list endpoints page"."""


@dataclass(frozen=True)
class Correction:
    setting: str
    """As the developer names it: "the login rate limit"."""
    old: str
    new: str
    reason: str
    ask: str
    """The setting in other words, for held-out questions."""


def _sections() -> dict[str, list[str]]:
    text = (resources.files("quipu.evals") / "data" / "tech" / "world.txt").read_text("utf-8")
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
        else:
            current.append(line)
    return sections


def _fields(line: str, expected: int) -> list[str]:
    parts = [part.strip() for part in line.split("|")]
    if len(parts) != expected:
        raise ValueError(f"world.txt: expected {expected} fields in {line!r}")
    return parts


def _domains(lines: list[str]) -> tuple[Domain, ...]:
    blocks: list[tuple[str, str, list[Entity], list[Helper]]] = []
    for line in lines:
        body = line.strip()
        if not line.startswith(" "):
            slug, app = _fields(body, 2)
            blocks.append((slug, app, [], []))
        elif body.startswith("helper "):
            words, args, guard, edge, main, purpose, edge_words, result = _fields(body[7:], 8)
            helper = Helper(
                tuple(words.split()), tuple(args.split()), guard, edge, main, purpose,
                edge_words, result,
            )  # fmt: skip
            blocks[-1][3].append(helper)
        else:
            head, _, fields = body.partition(":")
            name, table = head.split()
            entity_fields = tuple(Field(*f.split(":", 1)) for f in fields.split())
            blocks[-1][2].append(Entity(name, table, entity_fields))
    return tuple(Domain(app, slug, tuple(e), tuple(h)) for slug, app, e, h in blocks)


_WORLD = _sections()
DOMAINS = _domains(_WORLD["domains"])
DECISIONS = tuple(Decision(*_fields(line, 5)) for line in _WORLD["decisions"])
CORRECTIONS = tuple(Correction(*_fields(line, 5)) for line in _WORLD["corrections"])
