"""Typed errors. Every error a caller can see carries a stable ``code`` and an HTTP status.

The hierarchy::

    QuipuError                      root; .code, .status, .message, .details, .transient
    ├── InvalidInput        422     bad arguments (invalid_query, query_too_long, invalid_argument,
    │   │                           subject_unresolvable, invalid_project_id, text_too_long, ...)
    │   └── SecretDetected  422     secret_detected: the text holds a credential-like span (SAFE-1)
    ├── Unauthorized        401     missing or bad credential
    ├── Forbidden           403     credential valid, act not allowed
    ├── NotFound            404     missing *or* foreign: the two are indistinguishable (SCOPE-7)
    ├── Conflict            409     version_conflict, illegal_transition, embedding_model_mismatch
    │   └── Closed          409     client_closed: a call after close()
    ├── PreconditionRequired 428    expected_version_required: name the version you replace
    ├── PayloadTooLarge     413     payload_too_large
    ├── LimitExceeded       429     quota_exceeded, rate_limited (.retry_after seconds)
    ├── Unavailable         503     transient: embedder_unavailable, store_busy — retry later
    └── ConfigurationError  500     settings that cannot start a service (raised at start-up only)

Permanent errors (4xx) mean "do not retry the same call"; ``transient`` errors may succeed later.
"""

from __future__ import annotations

from typing import Any, ClassVar


class QuipuError(Exception):
    """Root of every error Quipu raises on purpose."""

    status: ClassVar[int] = 500
    default_code: ClassVar[str] = "internal_error"
    transient: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.details: dict[str, Any] = details or {}

    def to_dict(self) -> dict[str, Any]:
        """The error envelope body of API-2."""
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class InvalidInput(QuipuError):
    status = 422
    default_code = "invalid_argument"


class SecretDetected(InvalidInput):
    default_code = "secret_detected"


class Unauthorized(QuipuError):
    status = 401
    default_code = "unauthorized"


class Forbidden(QuipuError):
    status = 403
    default_code = "forbidden"


class NotFound(QuipuError):
    status = 404
    default_code = "not_found"


class Conflict(QuipuError):
    status = 409
    default_code = "conflict"


class Closed(Conflict):
    """A call on a client (or its store) after ``close()``: open a new one; never transient."""

    default_code = "client_closed"


class PreconditionRequired(QuipuError):
    """A change over HTTP or MCP must name the version it replaces (LIFE-2)."""

    status = 428
    default_code = "expected_version_required"


class PayloadTooLarge(QuipuError):
    status = 413
    default_code = "payload_too_large"


class LimitExceeded(QuipuError):
    status = 429
    default_code = "rate_limited"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, code=code, details=details)
        self.retry_after = retry_after


class Unavailable(QuipuError):
    status = 503
    default_code = "unavailable"
    transient = True


class EmbeddingUnavailable(Unavailable):
    default_code = "embedder_unavailable"


class ConfigurationError(QuipuError):
    default_code = "configuration_error"


def closed_store() -> Closed:
    """What every store call answers once the store (and the client over it) was closed."""
    return Closed("this client is closed; open a new one", code="client_closed")
