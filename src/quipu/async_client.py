"""The awaited client of a Quipu server: ``quipu.AsyncClient(url, key)`` (API-1).

The methods of :class:`quipu.Client` with the same arguments and results, as coroutines
(``export`` gives an async iterator; ``session(id)`` a session whose methods are awaited), on
an :class:`httpx.AsyncClient`. Both clients send the requests :mod:`quipu.wire` spells, so
an operation is written once; this is a client only, the server is the same.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import anyio
import httpx

from quipu import wire
from quipu.core import validate
from quipu.core.jobs import Job
from quipu.core.query import Page, RecallResult
from quipu.core.records import MemoryVersion, WriteResult
from quipu.core.sessions import SessionTurn
from quipu.errors import Unavailable
from quipu.remote import RunTokens, Subject
from quipu.remote_batch import AsyncBatchCalls
from quipu.remote_governance import AsyncGovernanceCalls
from quipu.remote_graph import AsyncGraphCalls
from quipu.remote_index import AsyncIndexCalls
from quipu.remote_knowledge import AsyncKnowledgeCalls
from quipu.remote_placement import AsyncPlacementCalls
from quipu.remote_planes import AsyncPlaneCalls
from quipu.storage.base import Vector
from quipu.wire import Call, Instant, Retry, error_from_response

__all__ = ["AsyncClient", "AsyncRemoteSession"]

T = TypeVar("T")


class AsyncClient(
    AsyncGovernanceCalls,
    AsyncKnowledgeCalls,
    AsyncPlaneCalls,
    AsyncIndexCalls,
    AsyncGraphCalls,
    AsyncPlacementCalls,
    AsyncBatchCalls,
):
    """A Quipu server over HTTP, awaited: the methods of :class:`quipu.Client`, as
    coroutines. ``key`` is an API key or run token (none in local mode).

    ``timeout`` bounds each request (seconds, or an :class:`httpx.Timeout`); ``retry`` says
    how refused requests are retried; a superadmin key names the ``tenant`` it acts on. Close
    it (``await client.aclose()``, or use ``async with``)."""

    def __init__(
        self,
        url: str,
        key: str | None = None,
        *,
        timeout: float | httpx.Timeout = 30.0,
        retry: Retry | None = None,
        token_ttl_seconds: int = 3600,
        transport: httpx.AsyncBaseTransport | None = None,
        tenant: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.retry = retry or Retry()
        self.timeout = timeout
        self._key = key
        self._subject: Subject | None = None
        self._parent: AsyncClient | None = None
        self._minting = anyio.Lock()
        self._tokens = RunTokens(token_ttl_seconds)
        headers = {"Accept": "application/json", "User-Agent": "quipu-python-client"}
        if tenant is not None:  # a superadmin names the tenant it acts on (SCOPE-8)
            headers["X-Quipu-Tenant"] = validate.identifier(tenant, field="tenant")
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=headers, timeout=timeout, transport=transport
        )

    def __repr__(self) -> str:
        who = "" if self._subject is None else f", subject={self._subject!r}"
        return f"AsyncClient({self.url!r}{who})"

    def for_subject(self, *, agent_id: str, user_id: str | None = None) -> AsyncClient:
        """A client acting as ``agent_id`` (for ``user_id``) through run tokens this client's
        service key mints (``POST /v1/tokens``), cached per subject and renewed before they
        expire; shares this client's connections. Closing it closes nothing shared."""
        root = self._parent or self
        child = AsyncClient.__new__(AsyncClient)
        child.url, child.retry, child.timeout = root.url, root.retry, root.timeout
        child._key, child._http, child._tokens = None, root._http, root._tokens
        child._minting = root._minting
        child._subject, child._parent = (agent_id, user_id), root
        return child

    # -- writes ------------------------------------------------------------------------------
    async def remember(
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
        return (await self._send(wire.remember(wire.given(locals())))).memory

    async def remember_result(
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
        return await self._send(wire.remember(wire.given(locals())))

    async def revise(
        self,
        memory_id: str,
        text: str,
        *,
        expected_version: int | None = None,
        reason: str | None = None,
        valid_at: Instant | None = None,
    ) -> MemoryVersion:
        """Write a new version with new text (409 ``version_conflict`` on a stale version)."""
        body = wire.given(locals(), leave_out=["memory_id"])
        return await self._send(wire.patch(memory_id, body))

    async def supersede(
        self,
        old_id: str,
        new_id: str,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Link ``old_id`` to its replacement ``new_id`` and end its validity now."""
        return await self._send(wire.supersede(old_id, wire.given(locals(), leave_out=["old_id"])))

    async def forget(
        self, memory_id: str, *, reason: str | None = None, expected_version: int | None = None
    ) -> MemoryVersion:
        """Logical delete: recall, list and get stop showing it; history keeps it."""
        return await self._send(
            wire.forget(memory_id, wire.given(locals(), leave_out=["memory_id"]))
        )

    async def set_status(
        self,
        memory_id: str,
        status: str,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Move a memory through the lifecycle; an illegal move is a :class:`Conflict`."""
        body = wire.given(locals(), leave_out=["memory_id"])
        return await self._send(wire.patch(memory_id, body))

    # -- reads -------------------------------------------------------------------------------
    async def get(self, memory_id: str) -> MemoryVersion:
        return await self._send(wire.get(memory_id))

    async def history(self, memory_id: str) -> builtins.list[MemoryVersion]:
        return await self._send(wire.history(memory_id))

    async def recall(
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
        return await self._send(wire.recall(wire.given(locals())))

    # -- sessions, jobs, export --------------------------------------------------------------
    def session(self, session_id: str) -> AsyncRemoteSession:
        return AsyncRemoteSession(self, session_id)

    async def get_job(self, job_id: str) -> Job:
        """A job of the caller's own (a promotion it asked for), or any of the tenant's for an
        admin; another's looks missing (404)."""
        return await self._send(wire.get_job(job_id))

    async def list_jobs(self, *, status: str | None = None, limit: int = 100) -> builtins.list[Job]:
        """The tenant's jobs, newest first (admins)."""
        return await self._send(wire.list_jobs(wire.given(locals())))

    async def export(self) -> AsyncIterator[tuple[MemoryVersion, Vector | None]]:
        """Every version of the tenant with its vector (admins; API-4), read as it streams."""
        response = await self._exchange("GET", wire.EXPORT_PATH, None, None, stream=True)
        if not response.is_success:
            await response.aread()
            await response.aclose()
            raise error_from_response(response)
        return _arows(response)

    async def aclose(self) -> None:
        if self._parent is None:
            await self._http.aclose()

    async def close(self) -> None:
        """The same as :meth:`aclose` (the name :class:`quipu.Client` uses)."""
        await self.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- plumbing ----------------------------------------------------------------------------
    async def _send(self, call: Call[T]) -> T:
        response = await self._exchange(call.method, call.path, call.params, call.json)
        return wire.decode(call, response)

    async def _exchange(
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
            headers = await self._authorization()
            request = self._http.build_request(
                method, path, params=params, json=body, headers=headers
            )
            try:
                response = await self._http.send(request, stream=stream)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                wait = self.retry.delay(attempt, None)
                if wait is None:
                    raise wire.transport_error(self.url, exc) from exc
            except httpx.TransportError as exc:
                raise wire.transport_error(self.url, exc) from exc
            else:
                if response.status_code == 401 and self._subject is not None and not renewed:
                    await response.aclose()
                    self._tokens.drop(self._subject)
                    renewed = True
                    continue
                wait = self.retry.delay(attempt, response)
                if wait is None:
                    if not stream:
                        await response.aread()
                    return response
                await response.aclose()
            await anyio.sleep(wait)
            attempt += 1

    async def _authorization(self) -> dict[str, str]:
        if self._subject is None:
            return {"Authorization": f"Bearer {self._key}"} if self._key else {}
        assert self._parent is not None
        async with self._minting:
            cached = self._tokens.cached(self._subject)
            if cached is None:
                call = wire.mint_token(self._tokens.mint_body(self._subject))
                minted, expires = await self._parent._send(call)
                self._tokens.keep(self._subject, minted, expires)
                cached = minted
        return {"Authorization": f"Bearer {cached}"}

    # ``list`` last: below it, the name would shadow the builtin in annotations.
    async def list(
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
        return await self._send(wire.list_memories(wire.given(locals())))


class AsyncRemoteSession:
    """A session on the server, acting as the client's subject; its methods are awaited."""

    def __init__(self, client: AsyncClient, session_id: str) -> None:
        self._client = client
        self.session_id = session_id

    def __repr__(self) -> str:
        return f"AsyncRemoteSession({self.session_id!r})"

    async def append(
        self,
        role: str,
        content: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        expires_at: Instant | None = None,
        observed_at: Instant | None = None,
    ) -> SessionTurn:
        body = wire.given(locals())
        return await self._client._send(wire.append_turn(self.session_id, body))

    async def history(self, *, after: int = 0, limit: int | None = None) -> list[SessionTurn]:
        params = wire.given(locals())
        return await self._client._send(wire.session_history(self.session_id, params))

    async def promote(self, *, wait: bool = False) -> Job:
        """Queue promotion into long-term memory; with ``wait``, poll the job until the
        server's worker has finished it (at most the client's timeout)."""
        job = await self._client._send(wire.promote(self.session_id))
        if not wait:
            return job
        with anyio.move_on_after(wire.wait_seconds(self._client.timeout)):
            pause = 0.05
            while not wire.job_is_done(job):
                await anyio.sleep(pause)
                pause = min(1.0, pause * 2)
                job = await self._client.get_job(job.job_id)
            return job
        raise Unavailable(
            f"job {job.job_id} is still {job.status.value}",
            code="job_timeout",
            details={"job_id": job.job_id},
        )


async def _arows(response: httpx.Response) -> AsyncIterator[tuple[MemoryVersion, Vector | None]]:
    reader = wire.ExportReader()
    try:
        async for line in response.aiter_lines():
            row = reader.feed(line)
            if row is not None:
                yield row
    finally:
        await response.aclose()
