"""An operator reads what the tenant keeps, whoever owns it, for the console (OPS-4): one
memory's every version, the tenant's sessions with their turns, promotion jobs and what was
promoted from them, and the tenant's subjects with their counts. Admins and superadmins only;
every read is audited (SAFE-4) like an oversight list, and a missing or foreign id is the one
404 (SCOPE-7)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from quipu.core import validate
from quipu.core.governance import SubjectInfo
from quipu.core.jobs import Job
from quipu.core.knowledge import ArticleVersion, MemoryUsage, can_read
from quipu.core.records import MemoryVersion, Principal, Scope, ScopeRef
from quipu.core.scopes import parse_scope
from quipu.core.sessions import SessionInfo, SessionKey, SessionTurn, Watermark
from quipu.errors import InvalidInput, NotFound
from quipu.governance.base import need_admin
from quipu.guard import not_found
from quipu.memories import MemoryService
from quipu.sessions import PROMOTE

#: A session page shows at most this many turns, promotion jobs and promoted memories.
MAX_TURNS = 500
MAX_JOBS = 20
MAX_PROMOTED = 200
#: A sessions or subjects list shows at most this many rows.
MAX_LISTED = 200


@dataclass(frozen=True)
class SessionView:
    """One session as an operator reads it: its turns (unexpired, in order), the watermark of
    its last promotion, its promotion jobs (newest first) and the memories written in it."""

    key: SessionKey
    turns: list[SessionTurn]
    watermark: Watermark | None
    jobs: list[Job]
    promoted: list[MemoryVersion]


class Inspection:
    """Tenant-wide reads of one memory family for operators."""

    def __init__(self, memory: MemoryService, clock: Callable[[], datetime] | None = None) -> None:
        self.store = memory.store
        self.guard = memory.guard
        self._clock = clock or (lambda: datetime.now(UTC))

    def history(
        self, principal: Principal, memory_id: object
    ) -> tuple[ScopeRef, list[MemoryVersion]]:
        """The partition and every version (oldest first) of a memory of the principal's
        tenant; audited as ``memory.inspect``."""
        need_admin(principal)
        ident = validate.identifier(memory_id, field="id")
        ref = self.store.locate(principal.tenant_id, ident)
        if ref is None:
            raise not_found(ident)
        versions = self.store.history(ref, ident)
        if not versions:
            raise not_found(ident)
        self.guard.audit(
            principal,
            "memory.inspect",
            (ident,),
            details={"scope": ref.scope.value, "owner": ref.owner},
        )
        return ref, versions

    def subjects(
        self, principal: Principal, *, after: tuple[str, str] | None = None
    ) -> tuple[list[SubjectInfo], tuple[str, str] | None]:
        """The tenant's scope owners (agents, end users, agent-user pairs, the tenant) with
        their live counts, after the (scope, owner) ``after``: what a tenant admin needs to
        find a subject's sessions or to erase an end user (LIFE-4), which admins may do.
        Audited as ``subjects.inspect``. Returns a page and the (scope, owner) to read the next
        one after (``None``: the last page)."""
        need_admin(principal)
        if after is not None:  # where the last page ended: a scope and an owner as listed
            _owner_parts(after[1])  # each part a valid id (400 otherwise, never a driver error)
            after = (parse_scope(after[0]).value, after[1])
        found = self.store.list_subjects(principal.tenant_id, after, MAX_LISTED + 1)
        page = found[:MAX_LISTED]
        self.guard.audit(principal, "subjects.inspect", (), details={"count": len(page)})
        more = len(found) > MAX_LISTED
        return page, (page[-1].scope.value, page[-1].owner) if more else None

    def sessions(
        self, principal: Principal, *, scope: str | None = None, owner: str | None = None
    ) -> list[SessionInfo]:
        """The tenant's sessions, the most recently written first; with ``scope`` and
        ``owner`` those of one subject (an agent, an end user or their pair). Audited as
        ``session.inspect``."""
        need_admin(principal)
        agent, user = _subject(scope, owner)
        found = self.store.list_sessions(principal.tenant_id, agent, user, MAX_LISTED)
        details: dict[str, Any] = {"count": len(found)}
        if scope is not None:
            details.update(scope=scope, owner=owner)
        self.guard.audit(principal, "session.inspect", (), details=details)
        return found

    def session(self, principal: Principal, owner: object, session_id: object) -> SessionView:
        """One session of the tenant by its subject (``agent\\x1fuser``) and id: 404 when it
        holds nothing (no turn, promotion or memory), as for another tenant's. Audited as
        ``session.inspect``."""
        need_admin(principal)
        agent, user = _owner_parts(owner)
        ident = validate.identifier(session_id, field="session_id")
        key = SessionKey(principal.tenant_id, f"{agent}\x1f{user or ''}", ident)
        turns = self.store.session_turns(key, 0, MAX_TURNS, self._clock())
        mark = self.store.get_watermark(key)
        jobs = self.store.session_jobs(
            principal.tenant_id, PROMOTE, f"{key.owner}\x1f{ident}", MAX_JOBS
        )
        refs = [ScopeRef(principal.tenant_id, Scope.AGENT, agent)]
        if user is not None:
            refs += [
                ScopeRef(principal.tenant_id, Scope.USER, user),
                ScopeRef(principal.tenant_id, Scope.AGENT_USER, key.owner),
            ]
        promoted = [
            m
            for m in self.store.session_memories(refs, ident, MAX_PROMOTED)
            if agent in (m.provenance.agent_id, m.provenance.key_id)
        ]
        if not (turns or mark or jobs or promoted):
            raise NotFound(f"no session {ident}", details={"session_id": ident})
        self.guard.audit(
            principal,
            "session.inspect",
            (ident,),
            details={"owner": key.owner, "turns": len(turns), "promoted": len(promoted)},
        )
        return SessionView(key, turns, mark, jobs, promoted)

    def usage(self, principal: Principal, memory_id: str) -> MemoryUsage | None:
        """A memory's recall count and the knowledge article it graduated to (GRAD-1), for
        its page (the page's own read of the memory is the audited one)."""
        need_admin(principal)
        return self.store.memory_usage(principal.tenant_id, memory_id)

    def articles(self, principal: Principal) -> list[ArticleVersion]:
        """The tenant's live knowledge articles (KNOW-1) the operator may read, the most
        recently written first, bodies included (the page shows a snippet of each)."""
        need_admin(principal)
        _, live = self.store.knowledge_live(principal.tenant_id)
        found = [a for a, _ in live if can_read(principal, a)]
        found.sort(key=lambda a: (a.recorded_at, a.id), reverse=True)
        return found[:MAX_LISTED]


def _subject(scope: str | None, owner: str | None) -> tuple[str | None, str | None]:
    """The (agent, user) parts a session's subject must have to belong to a scope owner."""
    if scope is None and owner is None:
        return None, None
    kind = parse_scope(scope or "")
    if kind in (Scope.TENANT, Scope.GLOBAL):
        return None, None
    if kind is Scope.USER:
        return None, validate.identifier(owner, field="owner")
    agent, user = _owner_parts(owner)
    if kind is Scope.AGENT:
        return agent, None
    if user is None:
        raise InvalidInput(
            "an agent_user owner is agent\\x1fuser", code="invalid_id", details={"field": "owner"}
        )
    return agent, user


def _owner_parts(owner: object) -> tuple[str, str | None]:
    """``agent`` or ``agent\\x1fuser``, each part a valid id."""
    if not isinstance(owner, str):
        raise InvalidInput("owner must be a string", code="invalid_id", details={"field": "owner"})
    agent, _, user = owner.partition("\x1f")
    validate.identifier(agent, field="owner")
    if user:
        validate.identifier(user, field="owner")
    return agent, user or None
