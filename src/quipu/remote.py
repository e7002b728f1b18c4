"""The Python client of a Quipu server: ``quipu.Client(url, key)``.

It has the verbs and return types of the embedded :class:`quipu.Quipu` (``remember`` gives a
:class:`MemoryVersion`, ``recall`` a :class:`RecallResult` of :class:`Hit`, ``list`` a
:class:`Page`, ...), so code written against :class:`MemoryClient` runs on either. Server
error envelopes come back as the same typed :class:`QuipuError` subclasses with the same
``code``; a server that cannot be reached is :class:`Unavailable` (transient).

Memories read over HTTP carry no ``tenant_id`` or ``owner``: the server never discloses them
(identity is the credential's business), so both are the empty string.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable
from urllib.parse import quote

import httpx

from quipu.core import validate
from quipu.core.query import Hit, Page, RecallResult
from quipu.core.records import (
    MemoryVersion,
    WriteResult,
)
from quipu.errors import (
    Conflict,
    EmbeddingUnavailable,
    Forbidden,
    InvalidInput,
    LimitExceeded,
    NotFound,
    PayloadTooLarge,
    PreconditionRequired,
    QuipuError,
    SecretDetected,
    Unauthorized,
    Unavailable,
)

if TYPE_CHECKING:
    from quipu.embedded import Quipu

Instant = datetime | str
T = TypeVar("T")

_BY_STATUS: dict[int, type[QuipuError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidInput,
    428: PreconditionRequired,
    429: LimitExceeded,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}
_BY_CODE: dict[str, type[QuipuError]] = {
    "secret_detected": SecretDetected,
    "embedder_unavailable": EmbeddingUnavailable,
}


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

    def history(self, memory_id: str) -> list[MemoryVersion]: ...

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


class Client:
    """A Quipu server over HTTP. ``key`` is an API key or run token (none in local mode).

    Thread-safe; close it (or use ``with``).
    """

    def __init__(
        self,
        url: str,
        key: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        headers = {"Accept": "application/json", "User-Agent": "quipu-python-client"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._http = httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout, transport=transport
        )

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

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
    ) -> MemoryVersion:
        """Store ``text``; returns the memory (the existing one for an exact duplicate)."""
        return self.remember_result(
            text,
            scope=scope,
            kind=kind,
            tags=tags,
            metadata=metadata,
            aliases=aliases,
            project=project,
            confidence=confidence,
            source=source,
            observed_at=observed_at,
            valid_at=valid_at,
            invalid_at=invalid_at,
            session_id=session_id,
            run_id=run_id,
            model=model,
            prompt_version=prompt_version,
            quote=quote,
        ).memory

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
    ) -> WriteResult:
        """Like :meth:`remember`, also saying whether a new memory was created."""
        body = _present(
            text=text,
            scope=scope,
            kind=kind,
            tags=tags,
            metadata=metadata,
            aliases=aliases,
            project=project,
            confidence=confidence,
            source=source,
            observed_at=observed_at,
            valid_at=valid_at,
            invalid_at=invalid_at,
            session_id=session_id,
            run_id=run_id,
            model=model,
            prompt_version=prompt_version,
            quote=quote,
        )
        data = self._request("POST", "/v1/memories", json=body)
        return _convert(lambda: WriteResult(memory_from_dict(data["memory"]), data["created"]))

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
        body = _present(
            text=text, expected_version=expected_version, reason=reason, valid_at=valid_at
        )
        return self._memory("PATCH", _memory_path(memory_id), json=body)

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
        body = _present(new_id=new_id, reason=reason, expected_version=expected_version)
        return self._memory("POST", _memory_path(old_id) + "/supersede", json=body)

    def forget(
        self, memory_id: str, *, reason: str | None = None, expected_version: int | None = None
    ) -> MemoryVersion:
        """Logical delete: recall, list and get stop showing it; history keeps it. The reason
        travels in the body, never in a URL."""
        body = _present(reason=reason, expected_version=expected_version)
        return self._memory("POST", _memory_path(memory_id) + "/forget", json=body)

    def set_status(
        self,
        memory_id: str,
        status: str,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Move a memory through the lifecycle; an illegal move is a :class:`Conflict`."""
        body = _present(status=status, reason=reason, expected_version=expected_version)
        return self._memory("PATCH", _memory_path(memory_id), json=body)

    # -- reads -------------------------------------------------------------------------------
    def get(self, memory_id: str) -> MemoryVersion:
        return self._memory("GET", _memory_path(memory_id))

    def history(self, memory_id: str) -> list[MemoryVersion]:
        data = self._request("GET", _memory_path(memory_id) + "/history")
        return _convert(lambda: [memory_from_dict(v) for v in data["versions"]])

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
        body = _present(
            query=query,
            scope=scope,
            k=k,
            planes=planes,
            as_of=as_of,
            observed_after=observed_after,
            observed_before=observed_before,
            kinds=kinds,
            tags=tags,
            sources=sources,
            min_confidence=min_confidence,
            project=project,
            statuses=statuses,
        )
        data = self._request("POST", "/v1/recall", json=body)
        return _convert(lambda: recall_from_dict(data))

    def close(self) -> None:
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
    def _memory(self, method: str, path: str, **kwargs: Any) -> MemoryVersion:
        data = self._request(method, path, **kwargs)
        return _convert(lambda: memory_from_dict(data))

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise Unavailable(
                f"{self.url} did not answer in time: {exc}", code="server_timeout"
            ) from exc
        except httpx.TransportError as exc:
            raise Unavailable(f"cannot reach {self.url}: {exc}", code="server_unreachable") from exc
        if response.is_success:
            try:
                return response.json()
            except ValueError:
                raise _unreadable(response) from None
        raise error_from_response(response)

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
        params = _present(
            scope=scope,
            cursor=cursor,
            limit=limit,
            as_of=as_of,
            observed_after=observed_after,
            observed_before=observed_before,
            kinds=kinds,
            tags=tags,
            sources=sources,
            min_confidence=min_confidence,
            project=project,
            statuses=statuses,
        )
        data = self._request("GET", "/v1/memories", params=params)
        return _convert(
            lambda: Page([memory_from_dict(m) for m in data["items"]], data["next_cursor"])
        )


# -- wire format -> domain types ---------------------------------------------------------------
def memory_from_dict(data: Mapping[str, Any]) -> MemoryVersion:
    """A :class:`MemoryVersion` from ``MemoryVersion.to_dict()`` as the server sends it."""
    return MemoryVersion.from_dict(data, tenant_id="", owner="")


def hit_from_dict(data: Mapping[str, Any]) -> Hit:
    return Hit(
        memory_from_dict(data["memory"]),
        float(data["score"]),
        int(data["rank"]),
        tuple(data.get("matched") or ()),
    )


def recall_from_dict(data: Mapping[str, Any]) -> RecallResult:
    return RecallResult([hit_from_dict(h) for h in data["results"]], dict(data["meta"]))


def error_from_response(response: httpx.Response) -> QuipuError:
    """The typed error of an error envelope, chosen by its code, else by the HTTP status."""
    status = response.status_code
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
        details = error.get("details") or {}
    except (ValueError, KeyError, TypeError):
        code = f"http_{status}"
        message = response.reason_phrase or f"HTTP {status}"
        details = {}
    by_status = _BY_STATUS.get(status, QuipuError)
    by_code = _BY_CODE.get(code)
    cls = by_code if by_code is not None and issubclass(by_code, by_status) else by_status
    if cls is LimitExceeded:
        return LimitExceeded(
            message, code=code, details=details, retry_after=_retry_after(response)
        )
    return cls(message, code=code, details=dict(details) if isinstance(details, dict) else {})


def _convert(build: Callable[[], T]) -> T:
    """Run a wire-to-domain conversion; a response of the wrong shape is a typed error."""
    try:
        return build()
    except (KeyError, TypeError, ValueError) as exc:
        raise QuipuError(
            f"the server's response does not have the expected shape: {exc!r}",
            code="invalid_response",
        ) from None


def _unreadable(response: httpx.Response) -> QuipuError:
    return QuipuError(
        f"the server answered {response.status_code} with a body that is not JSON",
        code="invalid_response",
    )


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["retry-after"])
    except (KeyError, ValueError):
        return None


def _memory_path(memory_id: str) -> str:
    ident = validate.identifier(memory_id, field="id")
    return "/v1/memories/" + quote(ident, safe="")


def _present(**fields: Any) -> dict[str, Any]:
    """The fields a caller set, ready for JSON or a query string (datetimes as ISO-8601)."""
    return {name: _wire(value) for name, value in fields.items() if value is not None}


def _wire(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | frozenset | set):
        return list(value)
    return value


if TYPE_CHECKING:  # mypy checks both clients against the one interface

    def _conforms(embedded: Quipu, remote: Client) -> tuple[MemoryClient, MemoryClient]:
        return embedded, remote
