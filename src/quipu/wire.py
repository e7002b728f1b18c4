"""What :class:`quipu.Client` and :class:`quipu.AsyncClient` share: each operation as one
request (:class:`Call`) with the function that turns its answer into domain types, error
envelopes turned back into typed errors, and the retry policy.

No I/O here: the two clients differ only in how they send a :class:`Call`, so an operation is
spelled once for both (STYLE: no sync and async twins written by hand).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import quote

from quipu.core import validate
from quipu.core.jobs import Job, JobStatus
from quipu.core.query import Hit, Page, RecallResult
from quipu.core.records import MemoryVersion, WriteResult
from quipu.core.sessions import SessionTurn
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
from quipu.storage.base import Vector

if TYPE_CHECKING:  # httpx only where a call is made: the embedded client never loads it
    import httpx

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
#: Answers that say the server did nothing and may do it later: retried for every method.
RETRY_STATUSES = frozenset({429, 503})
_TERMINAL_JOBS = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how to read its JSON answer."""

    method: str
    path: str
    decode: Callable[[Any], T]
    params: dict[str, Any] | None = None
    json: dict[str, Any] | None = None


@dataclass(frozen=True)
class Retry:
    """Retries of a refused request (429 and 503, and a connection never made).

    The n-th retry waits ``Retry-After`` when the server sends it, else ``backoff * 2**n``
    seconds with up to 10 % jitter. A wait longer than ``max_wait`` (an hourly budget spent)
    is not waited out: the error is raised at once with its ``retry_after``."""

    attempts: int = 3
    backoff: float = 0.5
    max_wait: float = 30.0
    jitter: Callable[[], float] = field(default=random.random, compare=False)

    def delay(self, attempt: int, response: httpx.Response | None) -> float | None:
        """Seconds to wait before retry number ``attempt`` (from 0), or None to give up."""
        if attempt >= self.attempts:
            return None
        if response is not None and response.status_code not in RETRY_STATUSES:
            return None
        told = None if response is None else retry_after(response)
        wait = told if told is not None else self.backoff * 2**attempt * (1 + self.jitter() / 10)
        return wait if wait <= self.max_wait else None


# -- requests ----------------------------------------------------------------------------------
def given(values: Mapping[str, Any], *, leave_out: Iterable[str] = ()) -> dict[str, Any]:
    """The arguments a caller set (``None`` means unset), ready for JSON or a query string."""
    skip = {"self", *leave_out}
    return {k: wire(v) for k, v in values.items() if k not in skip and v is not None}


def wire(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | frozenset | set):
        return list(value)
    return value


def memory_path(memory_id: str) -> str:
    ident = validate.identifier(memory_id, field="id")
    return "/v1/memories/" + quote(ident, safe="")


def session_path(session_id: str) -> str:
    ident = validate.identifier(session_id, field="session_id")
    return "/v1/sessions/" + quote(ident, safe="")


def job_path(job_id: str) -> str:
    ident = validate.identifier(job_id, field="job_id")
    return "/v1/jobs/" + quote(ident, safe="")


def remember(body: dict[str, Any]) -> Call[WriteResult]:
    return Call("POST", "/v1/memories", write_result_from_dict, json=body)


def recall(body: dict[str, Any]) -> Call[RecallResult]:
    """Asks for ``verbose`` hits: the client decodes each whole memory."""
    return Call("POST", "/v1/recall", recall_from_dict, json={**body, "verbose": True})


def list_memories(params: dict[str, Any]) -> Call[Page]:
    return Call("GET", "/v1/memories", page_from_dict, params=params)


def get(memory_id: str) -> Call[MemoryVersion]:
    return Call("GET", memory_path(memory_id), memory_from_dict)


def history(memory_id: str) -> Call[list[MemoryVersion]]:
    return Call("GET", memory_path(memory_id) + "/history", versions_from_dict)


def patch(memory_id: str, body: dict[str, Any]) -> Call[MemoryVersion]:
    return Call("PATCH", memory_path(memory_id), memory_from_dict, json=body)


def supersede(old_id: str, body: dict[str, Any]) -> Call[MemoryVersion]:
    return Call("POST", memory_path(old_id) + "/supersede", memory_from_dict, json=body)


def forget(memory_id: str, body: dict[str, Any]) -> Call[MemoryVersion]:
    """The reason travels in a body, never in a URL (issue 20 defect 4)."""
    return Call("POST", memory_path(memory_id) + "/forget", memory_from_dict, json=body)


def append_turn(session_id: str, body: dict[str, Any]) -> Call[SessionTurn]:
    return Call("POST", session_path(session_id) + "/turns", turn_from_dict, json=body)


def session_history(session_id: str, params: dict[str, Any]) -> Call[list[SessionTurn]]:
    return Call("GET", session_path(session_id) + "/turns", turns_from_dict, params=params)


def promote(session_id: str) -> Call[Job]:
    return Call("POST", session_path(session_id) + "/promote", lambda d: job_from_dict(d["job"]))


def get_job(job_id: str) -> Call[Job]:
    return Call("GET", job_path(job_id), job_from_dict)


def list_jobs(params: dict[str, Any]) -> Call[list[Job]]:
    return Call("GET", "/v1/jobs", lambda d: [job_from_dict(j) for j in d["items"]], params=params)


def mint_token(body: dict[str, Any]) -> Call[tuple[str, datetime | None]]:
    def decode(data: Any) -> tuple[str, datetime | None]:
        expires = data["credential"].get("expires_at")
        return str(data["token"]), None if expires is None else datetime.fromisoformat(expires)

    return Call("POST", "/v1/tokens", decode, json=body)


#: The export, read as JSON Lines (its answer is streamed, not decoded by a :class:`Call`).
EXPORT_PATH = "/v1/export"


def job_is_done(job: Job) -> bool:
    return job.status in _TERMINAL_JOBS


# -- answers -> domain types -------------------------------------------------------------------
def memory_from_dict(data: Mapping[str, Any]) -> MemoryVersion:
    """A :class:`MemoryVersion` from ``MemoryVersion.to_dict()`` as the server sends it."""
    return MemoryVersion.from_dict(data, tenant_id="", owner="")


def versions_from_dict(data: Mapping[str, Any]) -> list[MemoryVersion]:
    return [memory_from_dict(v) for v in data["versions"]]


def write_result_from_dict(data: Mapping[str, Any]) -> WriteResult:
    return WriteResult(memory_from_dict(data["memory"]), bool(data["created"]))


def page_from_dict(data: Mapping[str, Any]) -> Page:
    return Page([memory_from_dict(m) for m in data["items"]], data["next_cursor"])


def hit_from_dict(data: Mapping[str, Any]) -> Hit:
    return Hit(
        memory_from_dict(data["memory"]),
        float(data["score"]),
        int(data["rank"]),
        tuple(data.get("matched") or ()),
    )


def recall_from_dict(data: Mapping[str, Any]) -> RecallResult:
    return RecallResult([hit_from_dict(h) for h in data["results"]], dict(data["meta"]))


def turn_from_dict(data: Mapping[str, Any]) -> SessionTurn:
    return SessionTurn(
        session_id=str(data["session_id"]),
        seq=int(data["seq"]),
        role=str(data["role"]),
        content=str(data["content"]),
        metadata=dict(data.get("metadata") or {}),
        created_at=datetime.fromisoformat(data["created_at"]),
        expires_at=datetime.fromisoformat(data["expires_at"]),
        observed_at=datetime.fromisoformat(data["observed_at"])
        if data.get("observed_at")
        else None,
    )


def turns_from_dict(data: Mapping[str, Any]) -> list[SessionTurn]:
    return [turn_from_dict(t) for t in data["turns"]]


def job_from_dict(data: Mapping[str, Any]) -> Job:
    """A :class:`Job` from ``Job.to_dict()``, or from the handle a non-admin is shown (no
    payload, lease or fencing token: those fields take their defaults)."""

    def when(name: str) -> datetime | None:
        value = data.get(name)
        return None if value is None else datetime.fromisoformat(value)

    created = datetime.fromisoformat(data["created_at"])
    return Job(
        job_id=str(data["job_id"]),
        tenant_id=str(data.get("tenant_id") or ""),
        kind=str(data["kind"]),
        idempotency_key=str(data.get("idempotency_key") or ""),
        payload=dict(data.get("payload") or {}),
        status=JobStatus(data["status"]),
        attempts=int(data["attempts"]),
        max_attempts=int(data["max_attempts"]),
        run_after=when("run_after") or created,
        created_at=created,
        updated_at=when("updated_at") or created,
        fencing_token=int(data.get("fencing_token") or 0),
        lease_owner=data.get("lease_owner"),
        lease_expires_at=when("lease_expires_at"),
        checkpoint=dict(data.get("checkpoint") or {}),
        last_error=data.get("last_error"),
        result=dict(data.get("result") or {}),
        finished_at=when("finished_at"),
    )


class ExportReader:
    """Reads the export stream line by line (the format of :mod:`quipu.transfer`), so both
    clients can decode rows as they arrive."""

    def __init__(self) -> None:
        self.number = 0

    def feed(self, line: str) -> tuple[MemoryVersion, Vector | None] | None:
        """The row on this line, or None for the header and blank lines."""
        self.number += 1
        try:
            data = json.loads(line) if line.strip() else None
        except json.JSONDecodeError:
            raise QuipuError(
                f"line {self.number} of the export is not JSON", code="invalid_response"
            ) from None
        from quipu import transfer  # an export's codec, loaded by the first export read

        if self.number == 1:
            head = data if isinstance(data, dict) else {}
            if (head.get("format"), head.get("version")) != (
                transfer.FORMAT,
                transfer.FORMAT_VERSION,
            ):
                raise QuipuError("the export has no Quipu header", code="invalid_response")
            return None
        if data is None:
            return None
        if not isinstance(data, dict) or data.get("type") != "version":
            raise QuipuError(f"line {self.number} is not a version row", code="invalid_response")
        return transfer.decode(data)


def export_rows(lines: Iterable[str]) -> Iterator[tuple[MemoryVersion, Vector | None]]:
    reader = ExportReader()
    for line in lines:
        row = reader.feed(line)
        if row is not None:
            yield row


def wait_seconds(timeout: float | httpx.Timeout) -> float:
    """How long ``promote(wait=True)`` polls: the client's (read) timeout."""
    if isinstance(timeout, int | float):
        return float(timeout)
    return timeout.read or 30.0


def convert(build: Callable[[], T]) -> T:
    """Run a wire-to-domain conversion; an answer of the wrong shape is a typed error."""
    try:
        return build()
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise QuipuError(
            f"the server's response does not have the expected shape: {exc!r}",
            code="invalid_response",
        ) from None


def decode(call: Call[T], response: httpx.Response) -> T:
    """The answer of ``call``: its decoded body when it succeeded, else its typed error."""
    if not response.is_success:
        raise error_from_response(response)
    try:
        data = response.json()
    except ValueError:
        raise QuipuError(
            f"the server answered {response.status_code} with a body that is not JSON",
            code="invalid_response",
        ) from None
    return convert(lambda: call.decode(data))


def transport_error(url: str, exc: httpx.TransportError) -> Unavailable:
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return Unavailable(f"{url} did not answer in time: {exc}", code="server_timeout")
    return Unavailable(f"cannot reach {url}: {exc}", code="server_unreachable")


def error_from_response(response: httpx.Response) -> QuipuError:
    """The typed error of an error envelope, chosen by its code, else by the HTTP status."""
    import httpx

    status = response.status_code
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
        details = error.get("details") or {}
    except (ValueError, KeyError, TypeError, httpx.ResponseNotRead):
        code = f"http_{status}"
        message = response.reason_phrase or f"HTTP {status}"
        details = {}
    by_status = _BY_STATUS.get(status, QuipuError)
    by_code = _BY_CODE.get(code)
    cls = by_code if by_code is not None and issubclass(by_code, by_status) else by_status
    if cls is LimitExceeded:
        return LimitExceeded(message, code=code, details=details, retry_after=retry_after(response))
    return cls(message, code=code, details=dict(details) if isinstance(details, dict) else {})


def retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (the delta form; an HTTP date is not sent by Quipu)."""
    try:
        seconds = float(response.headers["retry-after"])
    except (KeyError, ValueError):
        return None
    return seconds if seconds >= 0 else None


def error_from_item(status: int, error: Mapping[str, Any]) -> QuipuError:
    """The typed error of one refused item of a bulk answer (its status and error body)."""
    code, message = str(error.get("code", f"http_{status}")), str(error.get("message", ""))
    details = error.get("details")
    by_status = _BY_STATUS.get(status, QuipuError)
    by_code = _BY_CODE.get(code)
    cls = by_code if by_code is not None and issubclass(by_code, by_status) else by_status
    return cls(message, code=code, details=dict(details) if isinstance(details, dict) else {})
