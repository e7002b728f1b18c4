"""Quipu: a memory service for AI agents.

``quipu.open(path)`` gives an embedded client over one SQLite file with the bundled embedding
model; ``quipu serve`` runs the same service over HTTP.
"""

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
    Conflict,
    EmbeddingUnavailable,
    Forbidden,
    InvalidInput,
    LimitExceeded,
    NotFound,
    QuipuError,
    SecretDetected,
    Unavailable,
)
from quipu.remote import Client, MemoryClient, SessionClient
from quipu.settings import Settings
from quipu.version import __version__

__all__ = [
    "AsyncClient",
    "Client",
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
    "Unavailable",
    "WriteResult",
    "__version__",
    "open",
]
