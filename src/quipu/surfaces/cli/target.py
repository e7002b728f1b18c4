"""Where a memory verb of the CLI runs (API-4, issue 20 defect 15).

``database`` names a local store (a file or a ``postgresql://`` URL): the verb runs on it as
the trusted local principal, through the embedded client. It names a Quipu server (an
``http(s)://`` URL): the verb is a request to that server through :class:`quipu.Client`, with
the API key or run token in ``QUIPU_API_KEY``; the server decides who the caller is.
Both clients have one interface (:class:`quipu.remote.MemoryClient`), so a verb is written once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from quipu.errors import QuipuError, Unauthorized

if TYPE_CHECKING:
    from quipu.remote import MemoryClient
    from quipu.settings import Settings


def is_server(settings: Settings) -> bool:
    from quipu.composition import database_kind

    return database_kind(settings.database) == "server"


def open_client(settings: Settings, key: str | None) -> MemoryClient:
    """The embedded client over the configured store, or the HTTP client of the server."""
    from quipu import Client, Quipu
    from quipu.composition import build_runtime, build_service, local_principal

    if is_server(settings):
        return Client(settings.database, key)
    service = build_service(settings)
    try:
        runtime = build_runtime(settings, service)
    except BaseException:
        service.close()
        service.store.close()
        raise
    return Quipu(runtime, local_principal(settings, "cli"))


def hint(exc: QuipuError, settings: Settings, key: str | None) -> str | None:
    """A next step for an error that needs one (a server asked for a key none was given)."""
    from quipu.composition import API_KEY_ENV

    if isinstance(exc, Unauthorized) and is_server(settings) and key is None:
        return f"the server requires a key: set {API_KEY_ENV} to an API key or run token"
    return None
