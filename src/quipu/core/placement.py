"""Placement by ontology (GRAPH-2): which scope a new memory and its graph mirror belong in.
Pure, no I/O.

A tenant's **placement policy** is versioned operator configuration: for some entity types,
that facts about things of that type live in the ``tenant`` scope, with the names the tenant
knows to be of that type (the deterministic extractor types people, places, organisations,
products and events by itself; a tenant's own types such as ``service`` or ``policy`` are
recognised by these names), and the user or agent ids whose writes never leave their scope
(**isolated** callers).

:func:`decide` makes the decision once per write, before either half is written. It moves a
memory to the tenant scope only when every check passes, in this order (the first that refuses
decides, and the audit names it):

1. ``candidate``: the memory is written active, in a private scope (agent, user, agent_user),
   and its text names something (a candidate, a quarantined memory or a write the caller
   already aimed at the tenant stays where it was asked to go);
2. ``declared_type``: every subject (the subjects of the extracted facts, or every entity the
   text names when no fact was extracted; dates do not count) is of a type the policy places
   in the tenant scope;
3. ``consistent_typing``: each subject has one type: within the text, and for every entity of
   that name or alias already in the writer's scope or the tenant scope (``other`` is untyped
   and agrees with anything);
4. ``not_profile``: the text is not about the writer: it does not speak in the first person
   ("I", "me", "my") and names neither the first-person entity
   (:data:`quipu.core.graph.SELF_NAME`) nor the caller's user id or agent id;
5. ``not_isolated``: the policy does not name the caller's user id, agent id or key id as
   isolated;
6. ``memory_grant``: the caller may write the tenant scope's memory rows (``tenant:write``, or
   an admin key);
7. ``graph_grant``: the caller may write the tenant scope's graph (``graph:tenant_write``, or an
   admin key).

Any doubt keeps the memory in the writer's scope: declining costs what the system already
costs; moving a memory wrongly is not recoverable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from quipu.core.graph import (
    MAX_NAME_CHARS,
    SELF_NAME,
    Extraction,
    Mention,
    folded_name,
    ontology_name,
)
from quipu.core.records import Principal, Role, Scope, Status
from quipu.core.scopes import TENANT_WRITE_GRANT
from quipu.core.validate import clean_string
from quipu.errors import InvalidInput

#: The grant that lets a key write the tenant scope's graph mirror (with ``tenant:write`` for
#: the memory row, both needed for a placement).
GRAPH_TENANT_GRANT = "graph:tenant_write"
#: The checks of :func:`decide`, in the order they run.
CHECKS = (
    "candidate",
    "declared_type",
    "consistent_typing",
    "not_profile",
    "not_isolated",
    "memory_grant",
    "graph_grant",
)
#: What a decision that passed every check names as its deciding check.
PLACED = "all_passed"
#: Bounds of a policy (a declaration over them is 422).
MAX_TYPES = 50
MAX_NAMES = 1_000
MAX_ISOLATED = 1_000
#: The scopes a type may place its facts in: the tenant's, or the writer's own (the default).
PLACEMENT_SCOPES = ("tenant", "writer")
_PRIVATE = frozenset({Scope.AGENT, Scope.USER, Scope.AGENT_USER})
_UNTYPED = "other"
_FIRST_PERSON = re.compile(r"\bI\b|\b(?i:me|my|mine|myself)\b")


@dataclass(frozen=True)
class PlacedType:
    """One declared type: the scope its facts belong in, and the names known to be of it."""

    type: str
    scope: str
    names: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "scope": self.scope, "names": list(self.names)}


@dataclass(frozen=True)
class Policy:
    """One version of a tenant's placement policy."""

    version: int = 0
    types: tuple[PlacedType, ...] = ()
    isolated: tuple[str, ...] = ()
    declared_by: str | None = None
    declared_at: datetime | None = None
    reason: str | None = None

    @property
    def tenant_types(self) -> frozenset[str]:
        return frozenset(t.type for t in self.types if t.scope == "tenant")

    @property
    def named(self) -> dict[str, str]:
        """Each declared name (folded) and its type."""
        return {folded_name(n): t.type for t in self.types for n in t.names}

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "types": [t.to_dict() for t in self.types],
            "isolated": list(self.isolated),
            "declared_by": self.declared_by,
            "declared_at": None if self.declared_at is None else self.declared_at.isoformat(),
            "reason": self.reason,
        }

    def body(self) -> dict[str, Any]:
        """What a stored version keeps as JSON (the rest are columns)."""
        return {"types": [t.to_dict() for t in self.types], "isolated": list(self.isolated)}


def from_body(body: Mapping[str, Any], **columns: Any) -> Policy:
    """A stored version back from its JSON body (a malformed body reads as no policy types)."""
    types = []
    for item in body.get("types") or ():
        if isinstance(item, Mapping) and isinstance(item.get("type"), str):
            names = tuple(str(n) for n in item.get("names") or () if isinstance(n, str))
            types.append(PlacedType(str(item["type"]), str(item.get("scope")), names))
    isolated = tuple(str(i) for i in body.get("isolated") or () if isinstance(i, str))
    return Policy(types=tuple(types), isolated=isolated, **columns)


def _bad(message: str, field_name: str, **details: Any) -> InvalidInput:
    return InvalidInput(message, code="invalid_placement", details={"field": field_name, **details})


def _list(value: object, field_name: str, most: int) -> list[object]:
    if value is None:
        return []
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise _bad(f"{field_name} must be a list", field_name)
    if len(value) > most:
        raise _bad(f"{field_name} holds at most {most} items", field_name, most=most)
    return list(value)


def _name(value: object, field_name: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_CHARS:
        raise _bad(f"{field_name} must be a name of 1 to {MAX_NAME_CHARS} characters", field_name)
    cleaned = clean_string(value.strip(), field_name)
    if "\x00" in cleaned or any(ord(c) < 32 for c in cleaned):
        raise _bad(f"{field_name} must not hold control characters", field_name)
    return cleaned


def parse_policy(types: object, isolated: object) -> tuple[tuple[PlacedType, ...], tuple[str, ...]]:
    """A declaration's types and isolated ids, validated: 422 ``invalid_name`` for a type name
    that is not lowercase ``a-z0-9_`` (separators, NUL, over 40 characters), 422
    ``invalid_placement`` for anything else malformed (a scope other than ``tenant`` or
    ``writer``, a name declared under two types, lists over their bounds)."""
    placed: list[PlacedType] = []
    owner: dict[str, str] = {}
    total = 0
    for item in _list(types, "types", MAX_TYPES):
        if not isinstance(item, Mapping):
            raise _bad("each type is an object with type, scope and names", "types")
        unknown = set(item) - {"type", "scope", "names"}
        if unknown:
            raise _bad("unknown fields in a type", "types", unknown=sorted(map(str, unknown)))
        kind = ontology_name(item.get("type"), field="type")
        scope = item.get("scope", "tenant")
        if scope not in PLACEMENT_SCOPES:
            raise _bad("scope must be tenant or writer", "scope", allowed=list(PLACEMENT_SCOPES))
        names = [_name(n, "names") for n in _list(item.get("names"), "names", MAX_NAMES)]
        total += len(names)
        if total > MAX_NAMES:
            raise _bad(f"a policy names at most {MAX_NAMES} entities", "names")
        for n in names:
            key = folded_name(n)
            if owner.get(key, kind) != kind:
                raise _bad(f"{n!r} is declared under two types", "names", name=n)
            owner[key] = kind
        if any(p.type == kind for p in placed):
            raise _bad(f"type {kind!r} is declared twice", "types", type=kind)
        placed.append(PlacedType(kind, str(scope), tuple(dict.fromkeys(names))))
    ids = [_name(i, "isolated") for i in _list(isolated, "isolated", MAX_ISOLATED)]
    return tuple(placed), tuple(sorted(set(ids)))


def retype(extraction: Extraction, policy: Policy) -> Extraction:
    """The extraction with each mention the policy names given its declared type."""
    named = policy.named
    if not named:
        return extraction
    mentions = tuple(
        Mention(m.name, named.get(folded_name(m.name), m.type)) for m in extraction.mentions
    )
    return replace(extraction, mentions=mentions)


def subjects(extraction: Extraction) -> list[Mention]:
    """What the memory is about: its facts' subjects, or (no fact) every entity it names."""
    if extraction.facts:
        return [extraction.mentions[f.subject] for f in extraction.facts]
    return [m for m in extraction.mentions if m.type != "date"]


@dataclass(frozen=True)
class Decision:
    """Where a write goes and the check that decided it."""

    place: bool
    check: str
    reason: str
    subjects: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    policy_version: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    def audit(self) -> dict[str, Any]:
        return {
            "placed": "tenant" if self.place else "writer",
            "check": self.check,
            "reason": self.reason,
            "subjects": list(self.subjects),
            "types": list(self.types),
            "policy_version": self.policy_version,
            **self.details,
        }


def _profile_names(principal: Principal) -> set[str]:
    ids = (SELF_NAME, principal.user_id, principal.agent_id)
    return {folded_name(i) for i in ids if i}


def holds_memory_grant(principal: Principal) -> bool:
    return principal.role in (Role.ADMIN, Role.SUPERADMIN) or TENANT_WRITE_GRANT in principal.grants


def holds_graph_grant(principal: Principal) -> bool:
    return principal.role in (Role.ADMIN, Role.SUPERADMIN) or GRAPH_TENANT_GRANT in principal.grants


def decide(
    policy: Policy,
    principal: Principal,
    scope: Scope,
    status: Status,
    extraction: Extraction,
    stored: Mapping[str, Iterable[str]],
    text: str = "",
) -> Decision:
    """Where a memory written by ``principal`` into ``scope`` goes (see the module docstring).
    ``extraction`` is already :func:`retype`-d; ``stored`` maps each subject's folded name to
    the types of the entities of that name or alias already in the writer's and tenant
    scopes."""
    about = subjects(extraction)
    names = tuple(dict.fromkeys(m.name for m in about))
    kinds = tuple(dict.fromkeys(m.type for m in about))

    def stay(check: str, reason: str, **details: Any) -> Decision:
        return Decision(False, check, reason, names, kinds, policy.version, details)

    if status is not Status.ACTIVE:
        return stay("candidate", f"a {status.value} memory stays where it was written")
    if scope not in _PRIVATE:
        return stay("candidate", f"written to the {scope.value} scope as asked")
    if not about:
        return stay("candidate", "the text names nothing the graph can place")
    placed = policy.tenant_types
    off = [m.name for m in about if m.type not in placed]
    if off:
        return stay("declared_type", "a subject's type is not placed in the tenant scope", off=off)
    seen: dict[str, str] = {}
    for m in extraction.mentions:
        key = folded_name(m.name)
        if m.type != _UNTYPED and seen.setdefault(key, m.type) != m.type:
            return stay("consistent_typing", f"{m.name!r} is typed two ways in the text")
    for m in about:
        others = {t for t in stored.get(folded_name(m.name), ()) if t not in (_UNTYPED, m.type)}
        if others:
            return stay(
                "consistent_typing",
                f"{m.name!r} is already known as another type",
                known=sorted(others),
            )
    own = _profile_names(principal)
    if any(folded_name(m.name) in own for m in extraction.mentions):
        return stay("not_profile", "the text names the writer's own profile")
    if _FIRST_PERSON.search(text):
        return stay("not_profile", "the text speaks in the first person")
    mine = {i for i in (principal.user_id, principal.agent_id, principal.key_id) if i}
    if mine & set(policy.isolated):
        return stay("not_isolated", "the policy isolates this caller")
    if not holds_memory_grant(principal):
        return stay("memory_grant", f"the caller lacks {TENANT_WRITE_GRANT} for the memory row")
    if not holds_graph_grant(principal):
        return stay("graph_grant", f"the caller lacks {GRAPH_TENANT_GRANT} for the graph mirror")
    return Decision(True, PLACED, "every check passed", names, kinds, policy.version)
