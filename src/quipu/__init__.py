"""Quipu: a memory service for AI agents.

``quipu.open(path)`` gives an embedded client over one SQLite file with the bundled embedding
model; ``quipu serve`` runs the same service over HTTP.

The names below are imported when first used (PEP 562), so ``import quipu`` (and every
``quipu`` command, e.g. ``quipu --help``) does not load the embedding model's libraries or the
HTTP stack until something needs them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from quipu.version import __version__

if TYPE_CHECKING:
    from quipu.async_client import AsyncClient
    from quipu.core.query import Filters, Hit, Page, RecallResult
    from quipu.core.records import (
        Kind,
        MemoryVersion,
        Principal,
        Provenance,
        Role,
        Scope,
        Source,
        Status,
        Trust,
        WriteResult,
    )
    from quipu.embedded import Quipu, open
    from quipu.errors import (
        Closed,
        ConfigurationError,
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
    from quipu.remote import Client, MemoryClient, SessionClient
    from quipu.settings import Settings

#: Where each public name lives.
_HOMES = {
    "AsyncClient": "quipu.async_client",
    "Client": "quipu.remote",
    "MemoryClient": "quipu.remote",
    "SessionClient": "quipu.remote",
    "Quipu": "quipu.embedded",
    "open": "quipu.embedded",
    "Settings": "quipu.settings",
    **dict.fromkeys(("Filters", "Hit", "Page", "RecallResult"), "quipu.core.query"),
    **dict.fromkeys(
        (
            "Kind",
            "MemoryVersion",
            "Principal",
            "Provenance",
            "Role",
            "Scope",
            "Source",
            "Status",
            "Trust",
            "WriteResult",
        ),
        "quipu.core.records",
    ),
    **dict.fromkeys(
        (
            "Closed",
            "ConfigurationError",
            "Conflict",
            "EmbeddingUnavailable",
            "Forbidden",
            "InvalidInput",
            "LimitExceeded",
            "NotFound",
            "PayloadTooLarge",
            "PreconditionRequired",
            "QuipuError",
            "SecretDetected",
            "Unauthorized",
            "Unavailable",
        ),
        "quipu.errors",
    ),
}

__all__ = [
    "AsyncClient",
    "Client",
    "Closed",
    "ConfigurationError",
    "Conflict",
    "EmbeddingUnavailable",
    "Filters",
    "Forbidden",
    "Hit",
    "InvalidInput",
    "Kind",
    "LimitExceeded",
    "MemoryClient",
    "MemoryVersion",
    "NotFound",
    "Page",
    "PayloadTooLarge",
    "PreconditionRequired",
    "Principal",
    "Provenance",
    "Quipu",
    "QuipuError",
    "RecallResult",
    "Role",
    "Scope",
    "SecretDetected",
    "SessionClient",
    "Settings",
    "Source",
    "Status",
    "Trust",
    "Unauthorized",
    "Unavailable",
    "WriteResult",
    "__version__",
    "open",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'quipu' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
