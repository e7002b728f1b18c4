"""The Python client of a Quipu server: ``quipu.Client(url, key)`` (API-1).

It has the verbs and return types of the embedded :class:`quipu.Quipu` (``remember`` gives a
:class:`MemoryVersion`, ``recall`` a :class:`RecallResult` of :class:`Hit`, ``list`` a
:class:`Page`, ``session(id).append`` a :class:`SessionTurn`, ``get_job`` a :class:`Job`, ...),
so code written against :class:`MemoryClient` runs on either; :class:`quipu.AsyncClient` has
the same methods, awaited. Server error envelopes come back as the same typed
:class:`QuipuError` subclasses with the same ``code``; a server that cannot be reached is
:class:`Unavailable` (transient). A refused request (429, 503, or a connection never made)
is retried with backoff, waiting ``Retry-After`` when the server sends one (:class:`Retry`).

A service key hands each agent run its own identity with :meth:`Client.for_subject`: a client
acting as one ``(agent_id, user_id)`` through run tokens it mints, caches and renews, so a
multi-user backend never puts identity in a request body (SCOPE-2).

Memories read over HTTP carry no ``tenant_id`` or ``owner``: the server never discloses them
(identity is the credential's business), so both are the empty string.
"""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import httpx

from quipu import wire
from quipu.core import validate
from quipu.core.jobs import Job
from quipu.core.query import Page, RecallResult
from quipu.core.records import MemoryVersion, WriteResult
from quipu.core.sessions import SessionTurn
from quipu.errors import Unavailable
from quipu.remote_batch import BatchCalls
from quipu.remote_governance import GovernanceCalls
from quipu.remote_graph import GraphCalls
from quipu.remote_index import IndexCalls
from quipu.remote_knowledge import KnowledgeCalls
from quipu.remote_placement import PlacementCalls
from quipu.remote_planes import PlaneCalls
from quipu.storage.base import Vector
from quipu.wire import (
    Call,
    Instant,
    Retry,
    error_from_response,
    hit_from_dict,
    memory_from_dict,
    recall_from_dict,
)

if TYPE_CHECKING:
    from quipu.embedded import Quipu

__all__ = [
    "Client",
    "Instant",
    "MemoryClient",
    "Retry",
    "SessionClient",
    "Subject",
    "error_from_response",
    "hit_from_dict",
    "memory_from_dict",
    "recall_from_dict",
]

T = TypeVar("T")
#: ``(agent_id, user_id)``: whom a run token acts as.
Subject = tuple[str, str | None]


@runtime_checkable
class SessionClient(Protocol):
    """One conversation's short-term memory (SESSION-1..3) and its promotion (PROMO-1)."""

    session_id: str

    def append(
        self,
        role: str,
        content: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        expires_at: Instant | None = None,
        observed_at: Instant | None = None,
    ) -> SessionTurn: ...

    def history(self, *, after: int = 0, limit: int | None = None) -> list[SessionTurn]: ...

    def promote(self, *, wait: bool = False) -> Job: ...


@runtime_checkable
class MemoryClient(Protocol):
    """The one interface of the embedded :class:`quipu.Quipu` and the HTTP :class:`Client`."""

    def remember(
        self,
        text: str,
        *,
        scope: str = "agent",
        kind: str = "fact",
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        aliases: Sequence[str] | None = None,
        project: str | None = None,
        confidence: float = 1.0,
        source: str = "explicit",
        observed_at: Instant | None = None,
        valid_at: Instant | None = None,
        invalid_at: Instant | None = None,
        session_id: str | None = None,
        run_id: str | None = None,
        model: str | None = None,
        prompt_version: str | None = None,
        quote: str | None = None,
        status: str | None = None,
    ) -> MemoryVersion: ...

    def remember_result(
        self,
        text: str,
        *,
        scope: str = "agent",
        kind: str = "fact",
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        aliases: Sequence[str] | None = None,
        project: str | None = None,
        confidence: float = 1.0,
        source: str = "explicit",
        observed_at: Instant | None = None,
        valid_at: Instant | None = None,
        invalid_at: Instant | None = None,
        session_id: str | None = None,
        run_id: str | None = None,
        model: str | None = None,
        prompt_version: str | None = None,
        quote: str | None = None,
        status: str | None = None,
    ) -> WriteResult: ...

    def recall(
        self,
        query: str,
        *,
        scope: str = "agent",
        k: int | None = None,
        planes: Sequence[str] | None = None,
        as_of: Instant | None = None,
        observed_after: Instant | None = None,
        observed_before: Instant | None = None,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        min_confidence: float | None = None,
        project: str | None = None,
        statuses: Sequence[str] | None = None,
    ) -> RecallResult: ...

    def get(self, memory_id: str) -> MemoryVersion: ...

    def history(self, memory_id: str) -> builtins.list[MemoryVersion]: ...

    def revise(
        self,
        memory_id: str,
        text: str,
        *,
        expected_version: int | None = None,
        reason: str | None = None,
        valid_at: Instant | None = None,
    ) -> MemoryVersion: ...

    def supersede(
        self,
        old_id: str,
        new_id: str,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion: ...

    def forget(
        self, memory_id: str, *, reason: str | None = None, expected_version: int | None = None
    ) -> MemoryVersion: ...

    def set_status(
        self,
        memory_id: str,
        status: str,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion: ...

    def session(self, session_id: str) -> SessionClient: ...

    def get_job(self, job_id: str) -> Job: ...

    def list_jobs(self, *, status: str | None = None, limit: int = 100) -> builtins.list[Job]: ...

    def export(self) -> Iterator[tuple[MemoryVersion, Vector | None]]: ...

    def close(self) -> None: ...

    def list(
        self,
        *,
        scope: str = "agent",
        cursor: str | None = None,
        limit: int | None = None,
        as_of: Instant | None = None,
        observed_after: Instant | None = None,
        observed_before: Instant | None = None,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        min_confidence: float | None = None,
        project: str | None = None,
        statuses: Sequence[str] | None = None,
    ) -> Page: ...


class RunTokens:
    """Run tokens minted by one service key, one per subject, renewed before they expire
    (when less than a tenth of their life, and at least 30 s, is left). Thread-safe."""

    def __init__(self, ttl_seconds: int) -> None:
        self.ttl_seconds = ttl_seconds
        self._tokens: dict[Subject, tuple[str, datetime | None]] = {}
        self.lock = threading.Lock()

    def cached(self, subject: Subject) -> str | None:
        found = self._tokens.get(subject)
        if found is None:
            return None
        token, expires = found
        margin = max(30.0, self.ttl_seconds / 10)
        if expires is not None and datetime.now(UTC) + timedelta(seconds=margin) >= expires:
            return None
        return token

    def keep(self, subject: Subject, token: str, expires: datetime | None) -> None:
        self._tokens[subject] = (token, expires)

    def drop(self, subject: Subject) -> None:
        self._tokens.pop(subject, None)

    def mint_body(self, subject: Subject) -> dict[str, Any]:
        agent_id, user_id = subject
        return wire.given(
            {"agent_id": agent_id, "user_id": user_id, "ttl_seconds": self.ttl_seconds}
        )


class Client(
    GovernanceCalls,
    KnowledgeCalls,
    PlaneCalls,
    IndexCalls,
    GraphCalls,
    PlacementCalls,
    BatchCalls,
):
    """A Quipu server over HTTP. ``key`` is an API key or run token (none in local mode).

    ``timeout`` bounds each request (seconds, or an :class:`httpx.Timeout`); ``retry`` says
    how refused requests are retried; a superadmin key names the ``tenant`` it acts on (sent
    as ``X-Quipu-Tenant``, SCOPE-8). The governance methods (erase, holds, review, judge,
    restore, merge, snapshots, projects, audit, oversight, job control) come from
    :class:`~quipu.remote_governance.GovernanceCalls`; ``kv``, ``documents`` and ``search``
    from :class:`~quipu.remote_planes.PlaneCalls`. Thread-safe; close it (or use ``with``)."""

    def __init__(
        self,
        url: str,
        key: str | None = None,
        *,
        timeout: float | httpx.Timeout = 30.0,
        retry: Retry | None = None,
        token_ttl_seconds: int = 3600,
        transport: httpx.BaseTransport | None = None,
        tenant: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.retry = retry or Retry()
        self.timeout = timeout
        self._key = key
        self._subject: Subject | None = None
        self._parent: Client | None = None
        self._tokens = RunTokens(token_ttl_seconds)
        headers = {"Accept": "application/json", "User-Agent": "quipu-python-client"}
        if tenant is not None:  # a superadmin names the tenant it acts on (SCOPE-8)
            headers["X-Quipu-Tenant"] = validate.identifier(tenant, field="tenant")
        self._http = httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout, transport=transport
        )

    def __repr__(self) -> str:
        who = "" if self._subject is None else f", subject={self._subject!r}"
        return f"Client({self.url!r}{who})"

    def for_subject(self, *, agent_id: str, user_id: str | None = None) -> Client:
        """A client acting as ``agent_id`` (for ``user_id``) through run tokens this client's
        service key mints (``POST /v1/tokens``), cached per subject and renewed before they
        expire; shares this client's connections. Closing it closes nothing shared."""
        root = self._parent or self
        child = Client.__new__(Client)
        child.url, child.retry, child.timeout = root.url, root.retry, root.timeout
        child._key, child._http, child._tokens = None, root._http, root._tokens
        child._subject, child._parent = (agent_id, user_id), root
        return child

    # -- writes ------------------------------------------------------------------------------
    def remember(
        self,
        text: str,
        *,
        scope: str = "agent",
        kind: str = "fact",
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        aliases: Sequence[str] | None = None,
        project: str | None = None,
        confidence: float = 1.0,
        source: str = "explicit",
        observed_at: Instant | None = None,
        valid_at: Instant | None = None,
        invalid_at: Instant | None = None,
        session_id: str | None = None,
        run_id: str | None = None,
        model: str | None = None,
        prompt_version: str | None = None,
        quote: str | None = None,
        status: str | None = None,
    ) -> MemoryVersion:
        """Store ``text``; returns the memory (the existing one for an exact duplicate)."""
        return self._send(wire.remember(wire.given(locals()))).memory

    def remember_result(
        self,
        text: str,
        *,
        scope: str = "agent",
        kind: str = "fact",
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        aliases: Sequence[str] | None = None,
        project: str | None = None,
        confidence: float = 1.0,
        source: str = "explicit",
        observed_at: Instant | None = None,
        valid_at: Instant | None = None,
        invalid_at: Instant | None = None,
        session_id: str | None = None,
        run_id: str | None = None,
        model: str | None = None,
        prompt_version: str | None = None,
        quote: str | None = None,
        status: str | None = None,
    ) -> WriteResult:
        """Like :meth:`remember`, also saying whether a new memory was created."""
        return self._send(wire.remember(wire.given(locals())))

    def revise(
        self,
        memory_id: str,
        text: str,
        *,
        expected_version: int | None = None,
        reason: str | None = None,
        valid_at: Instant | None = None,
    ) -> MemoryVersion:
        """Write a new version with new text (409 ``version_conflict`` on a stale version). The
        server needs ``expected_version`` (428 without; LIFE-2)."""
        body = wire.given(locals(), leave_out=["memory_id"])
        return self._send(wire.patch(memory_id, body))

    def supersede(
        self,
        old_id: str,
        new_id: str,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Link ``old_id`` to its replacement ``new_id`` and end its validity now. The server
        needs ``expected_version``, the version of ``old_id`` you read (428 without; LIFE-2)."""
        return self._send(wire.supersede(old_id, wire.given(locals(), leave_out=["old_id"])))

    def forget(
        self, memory_id: str, *, reason: str | None = None, expected_version: int | None = None
    ) -> MemoryVersion:
        """Logical delete: recall, list and get stop showing it; history keeps it."""
        return self._send(wire.forget(memory_id, wire.given(locals(), leave_out=["memory_id"])))

    def set_status(
        self,
        memory_id: str,
        status: str,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Move a memory through the lifecycle; an illegal move is a :class:`Conflict`."""
        body = wire.given(locals(), leave_out=["memory_id"])
        return self._send(wire.patch(memory_id, body))

    # -- reads -------------------------------------------------------------------------------
    def get(self, memory_id: str) -> MemoryVersion:
        return self._send(wire.get(memory_id))

    def history(self, memory_id: str) -> builtins.list[MemoryVersion]:
        return self._send(wire.history(memory_id))

    def recall(
        self,
        query: str,
        *,
        scope: str = "agent",
        k: int | None = None,
        planes: Sequence[str] | None = None,
        as_of: Instant | None = None,
        observed_after: Instant | None = None,
        observed_before: Instant | None = None,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        min_confidence: float | None = None,
        project: str | None = None,
        statuses: Sequence[str] | None = None,
    ) -> RecallResult:
        """Hybrid recall in one scope."""
        return self._send(wire.recall(wire.given(locals())))

    # -- sessions, jobs, export --------------------------------------------------------------
    def session(self, session_id: str) -> RemoteSession:
        return RemoteSession(self, session_id)

    def get_job(self, job_id: str) -> Job:
        """A job of the caller's own (a promotion it asked for), or any of the tenant's for an
        admin; another's looks missing (404)."""
        return self._send(wire.get_job(job_id))

    def list_jobs(self, *, status: str | None = None, limit: int = 100) -> builtins.list[Job]:
        """The tenant's jobs, newest first (admins)."""
        return self._send(wire.list_jobs(wire.given(locals())))

    def export(self) -> Iterator[tuple[MemoryVersion, Vector | None]]:
        """Every version of the tenant with its vector (admins; API-4), read as it streams."""
        response = self._exchange("GET", wire.EXPORT_PATH, None, None, stream=True)
        if not response.is_success:
            response.read()
            response.close()
            raise error_from_response(response)
        return _rows(response)

    def close(self) -> None:
        if self._parent is None:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- plumbing ----------------------------------------------------------------------------
    def _send(self, call: Call[T]) -> T:
        response = self._exchange(call.method, call.path, call.params, call.json)
        return wire.decode(call, response)

    def _exchange(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None,
        body: dict[str, Any] | None,
        *,
        stream: bool = False,
    ) -> httpx.Response:
        """Send one request, retrying it while the policy says so; a subject's client mints
        its token first and, on a 401 (the token revoked), once more."""
        attempt, renewed = 0, False
        while True:
            headers = self._authorization()
            request = self._http.build_request(
                method, path, params=params, json=body, headers=headers
            )
            response: httpx.Response | None = None
            try:
                response = self._http.send(request, stream=stream)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                wait = self.retry.delay(attempt, None)
                if wait is None:
                    raise wire.transport_error(self.url, exc) from exc
            except httpx.TransportError as exc:
                raise wire.transport_error(self.url, exc) from exc
            else:
                if response.status_code == 401 and self._subject is not None and not renewed:
                    response.close()
                    self._tokens.drop(self._subject)
                    renewed = True
                    continue
                wait = self.retry.delay(attempt, response)
                if wait is None:
                    return response
                response.close()
            time.sleep(wait)
            attempt += 1

    def _authorization(self) -> dict[str, str]:
        if self._subject is None:
            return {"Authorization": f"Bearer {self._key}"} if self._key else {}
        assert self._parent is not None
        with self._tokens.lock:
            cached = self._tokens.cached(self._subject)
            if cached is None:
                call = wire.mint_token(self._tokens.mint_body(self._subject))
                minted, expires = self._parent._send(call)
                self._tokens.keep(self._subject, minted, expires)
                cached = minted
        return {"Authorization": f"Bearer {cached}"}

    # ``list`` last: below it, the name would shadow the builtin in annotations.
    def list(
        self,
        *,
        scope: str = "agent",
        cursor: str | None = None,
        limit: int | None = None,
        as_of: Instant | None = None,
        observed_after: Instant | None = None,
        observed_before: Instant | None = None,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        min_confidence: float | None = None,
        project: str | None = None,
        statuses: Sequence[str] | None = None,
    ) -> Page:
        """One page of one scope, newest first; pass ``next_cursor`` on for the next."""
        return self._send(wire.list_memories(wire.given(locals())))


class RemoteSession:
    """A session on the server, acting as the client's subject."""

    def __init__(self, client: Client, session_id: str) -> None:
        self._client = client
        self.session_id = session_id

    def __repr__(self) -> str:
        return f"RemoteSession({self.session_id!r})"

    def append(
        self,
        role: str,
        content: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        expires_at: Instant | None = None,
        observed_at: Instant | None = None,
    ) -> SessionTurn:
        body = wire.given(locals())
        return self._client._send(wire.append_turn(self.session_id, body))

    def history(self, *, after: int = 0, limit: int | None = None) -> list[SessionTurn]:
        params = wire.given(locals())
        return self._client._send(wire.session_history(self.session_id, params))

    def promote(self, *, wait: bool = False) -> Job:
        """Queue promotion into long-term memory; with ``wait``, poll the job until the
        server's worker has finished it (at most the client's timeout, else
        :class:`Unavailable` ``job_timeout``)."""
        job = self._client._send(wire.promote(self.session_id))
        if not wait:
            return job
        deadline = time.monotonic() + wire.wait_seconds(self._client.timeout)
        pause = 0.05
        while not wire.job_is_done(job):
            if time.monotonic() >= deadline:
                raise Unavailable(
                    f"job {job.job_id} is still {job.status.value}",
                    code="job_timeout",
                    details={"job_id": job.job_id},
                )
            time.sleep(pause)
            pause = min(1.0, pause * 2)
            job = self._client.get_job(job.job_id)
        return job


def _rows(response: httpx.Response) -> Iterator[tuple[MemoryVersion, Vector | None]]:
    try:
        yield from wire.export_rows(response.iter_lines())
    finally:
        response.close()


if TYPE_CHECKING:  # mypy checks both clients against the one interface

    def _conforms(embedded: Quipu, remote: Client) -> tuple[MemoryClient, MemoryClient]:
        return embedded, remote
