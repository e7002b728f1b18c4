"""The composition root: the only place that reads files or the environment.

It turns settings (defaults < TOML file < ``QUIPU_*`` environment < explicit overrides) into a
running :class:`MemoryService` with its store and embedder.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError
from threadpoolctl import threadpool_limits

from quipu.auth.access import Access
from quipu.core.knowledge import BodyWriter
from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.core.sessions import SessionBounds
from quipu.core.urls import check_server_url, check_text, mask_credentials, url_scheme
from quipu.embeddings.base import Embedder
from quipu.embeddings.select import build_embedder
from quipu.errors import ConfigurationError
from quipu.extraction.base import Extractor
from quipu.governance import GovernanceService
from quipu.jobs.queue import JobQueue
from quipu.memories import MemoryService
from quipu.retrieval.rerank import CrossEncoder
from quipu.runtime import Runtime
from quipu.sessions import SessionConfig, SessionService
from quipu.settings import Settings
from quipu.storage.base import Store
from quipu.usage import UsageRecorder

ENV_PREFIX = "QUIPU_"
CONFIG_ENV = "QUIPU_CONFIG"
#: The API key or run token the CLI sends when ``database`` is a server URL (never a setting:
#: a credential is not configuration, and settings are printed).
API_KEY_ENV = "QUIPU_API_KEY"
#: How `quipu serve --workers N` hands its resolved settings to each worker process (JSON).
SERVE_SETTINGS_ENV = "QUIPU_SERVE_SETTINGS_JSON"


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Merge every settings source and validate once, with a clear message on error."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    path = config_file or env.get(CONFIG_ENV)
    if path:
        try:
            with open(path, "rb") as fh:
                values.update(tomllib.load(fh).get("quipu", {}))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigurationError(f"cannot read config file {path}: {exc}") from None
    fields = Settings.model_fields
    for name, field in fields.items():
        raw = env.get(ENV_PREFIX + name.upper())
        if raw is not None:
            values[name] = _parse_env(name, raw, field.annotation)
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigurationError(f"unknown setting(s): {', '.join(unknown)}")
    try:
        settings = Settings(**values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigurationError(f"invalid settings: {problems}") from None
    database_kind(settings.database)  # a value that names neither a store nor a server stops here
    return settings


def _parse_env(name: str, raw: str, annotation: Any) -> Any:
    """Strict parsing: booleans accept true/false/1/0/yes/no only; empty means unset."""
    if raw == "":
        return None
    if annotation is bool:
        lowered = raw.strip().lower()
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
        raise ConfigurationError(f"{ENV_PREFIX}{name.upper()} must be true or false, not {raw!r}")
    return raw


def is_postgres_url(database: str) -> bool:
    """A ``postgresql://`` (or ``postgres://``) URL selects the PostgreSQL backend."""
    return database.startswith(("postgresql://", "postgres://"))


DatabaseKind = Literal["file", "postgres", "server"]


def database_kind(database: str) -> DatabaseKind:
    """What a ``database`` value names: a SQLite file path, a PostgreSQL URL, or the
    ``http(s)://`` URL of a Quipu server (the CLI's memory verbs talk to one; no store opens on
    it). Anything else that starts like a URL (``ftp://…``, ``http:/x``, ``localhost:8750``),
    an empty value, NUL or a lone surrogate is a ConfigurationError, never a file name (issue
    20 defect 15); a file whose name holds a colon is written ``./name:with:colons``."""
    try:
        check_text(database)
        if not database.strip():
            raise ValueError("is empty")
        scheme = url_scheme(database)
        if scheme is None:
            return "file"
        if is_postgres_url(database):
            return "postgres"
        shown = mask_credentials(database)
        if scheme in ("postgresql", "postgres"):
            raise ValueError(f"{shown!r} is not a PostgreSQL URL: write postgresql://HOST/DB")
        if scheme in ("http", "https"):
            check_server_url(database)
            return "server"
        raise ValueError(
            f"{shown!r}: the scheme {scheme}: names neither a file path nor a postgresql:// or "
            "http(s):// URL (a file whose name holds a colon is written ./NAME)"
        )
    except ValueError as exc:
        raise ConfigurationError(f"invalid settings: database: {exc}") from None


def server_key(environ: Mapping[str, str] | None = None) -> str | None:
    """The key in :data:`API_KEY_ENV`, or None when it is unset or empty."""
    return (os.environ if environ is None else environ).get(API_KEY_ENV) or None


def build_store(settings: Settings) -> Store:
    if database_kind(settings.database) == "server":  # issue 20 defect 15: never a folder
        raise ConfigurationError(
            f"database {mask_credentials(settings.database)} is a Quipu server, not a store: "
            "reach it with quipu.Client(url, key) or the CLI's memory verbs"
        )
    # -- backend choice (issue 4): a PostgreSQL URL -> PostgresStore, anything else is a file --
    if is_postgres_url(settings.database):
        from quipu.storage.postgres.store import PostgresStore

        return PostgresStore(settings.database, max_connections=settings.pg_pool_size)
    # -- end backend choice --
    from quipu.storage.sqlite.store import SQLiteStore

    return SQLiteStore(
        settings.database,
        cache_rows=settings.vector_cache_rows,
        index_files=settings.sqlite_index_files,
        cache_bytes=settings.index_cache_mib << 20,
    )


def migrate_database(settings: Settings, *, citus: bool = False) -> dict[str, Any]:
    """Apply pending migrations (and with ``citus`` distribute the tables), then run the
    store's upkeep. Opening a store migrates too; this is the explicit, reportable step."""
    report: dict[str, Any] = {}
    if is_postgres_url(settings.database):
        import psycopg

        from quipu.storage.postgres.migrate import migrate

        with psycopg.connect(settings.database) as conn:
            done = migrate(conn, citus=citus)
        report = {"applied": done.applied, "distributed": done.distributed}
    elif citus:
        raise ConfigurationError("--citus needs a PostgreSQL database URL")
    store = build_store(settings)
    try:
        return {"backend": store.capabilities.backend, **report, "maintenance": store.maintain()}
    finally:
        store.close()


def build_reranker(settings: Settings) -> CrossEncoder | None:
    """The cross-encoder the ``reranker`` setting names, loaded and checked now."""
    if not settings.reranker:
        return None
    from quipu.retrieval.rerank import open_reranker

    return open_reranker(settings.reranker)


def build_service(settings: Settings, embedder: Embedder | None = None) -> MemoryService:
    if settings.blas_threads is not None:  # process-wide; measured in docs/benchmarks.md
        threadpool_limits(limits=settings.blas_threads, user_api="blas")
    store = build_store(settings)
    try:
        service = MemoryService(
            store,
            embedder if embedder is not None else build_embedder(settings),
            Limits.from_settings(
                settings,
                cpus=os.cpu_count() or 1,
                embedded=not is_postgres_url(settings.database),
            ),
            reranker=build_reranker(settings),
        )
    except BaseException:
        store.close()
        raise
    if settings.graph_extract:  # GRAPH-1: each new active memory read into the entity graph
        from quipu.graph.placement import Placement
        from quipu.graph.service import GraphService

        service.graph = GraphService(service)
        service.placement = Placement(service.graph)  # GRAPH-2: placement by ontology
    return service


def build_access(settings: Settings, store: Store) -> Access:
    return Access(store, max_token_ttl=timedelta(seconds=settings.max_token_ttl_seconds))


def local_principal(settings: Settings, surface: str = "library") -> Principal:
    """The trusted principal of embedded mode: one tenant, configurable agent and user ids."""
    return Principal(
        tenant_id=settings.local_tenant,
        key_id="local",
        role=Role.ADMIN,
        agent_id=settings.local_agent_id,
        user_id=settings.local_user_id,
        surface=surface,
    )


def build_body_writer(settings: Settings) -> BodyWriter | None:
    """The chat model that writes graduated articles' bodies (as review candidates): the
    extractor's endpoint when ``extractor = model``, else none."""
    if settings.extractor != "model":
        return None
    from quipu.article_candidates import ModelBodyWriter

    assert settings.extractor_base_url and settings.extractor_model
    return ModelBodyWriter(
        base_url=settings.extractor_base_url,
        model=settings.extractor_model,
        api_key=settings.extractor_api_key,
    )


def build_extractor(settings: Settings) -> Extractor:
    if settings.extractor == "model":
        from quipu.extraction.model import ModelExtractor

        assert settings.extractor_base_url and settings.extractor_model
        return ModelExtractor(
            base_url=settings.extractor_base_url,
            model=settings.extractor_model,
            api_key=settings.extractor_api_key,
        )
    from quipu.extraction.deterministic import DeterministicExtractor

    return DeterministicExtractor()


def build_runtime(
    settings: Settings,
    service: MemoryService,
    *,
    extractor: Extractor | None = None,
) -> Runtime:
    """Sessions, the durable queue and a worker with the promotion, sweep and prune handlers."""
    from quipu.consolidation.index import IndexService
    from quipu.harvest import Harvester
    from quipu.jobs import handlers

    extractor = extractor or build_extractor(settings)
    queue = JobQueue(service.store, lease=timedelta(seconds=settings.job_lease_seconds))
    sessions = SessionService(
        service.store,
        SessionConfig(
            ttl=timedelta(seconds=settings.session_ttl_seconds),
            model_budget_per_hour=settings.model_budget_per_hour,
            model_backed=bool(getattr(extractor, "uses_model", False)),
            bounds=SessionBounds(
                max_turns=settings.session_max_turns,
                max_owner_bytes=settings.session_max_bytes_per_owner,
            ),
        ),
        guard=service.guard,
    )
    governance = GovernanceService(service, queue)
    if service.usage is None:  # recall hits as usage events, off the request path (RECALL-6)
        service.usage = UsageRecorder(service.store, service.embedder)
    if service.body_writer is None and settings.graduation_model_bodies:
        service.body_writer = build_body_writer(settings)  # GRAD-1: review candidates
    index = IndexService(
        service,
        cache_seconds=settings.index_cache_seconds,
        expiry_days=settings.index_expiry_days,
    )
    # HARVEST-1: batches are durable jobs run by the worker (its own thread stays off)
    harvest = Harvester(
        service, extractor, capacity=settings.harvest_queue_size, queue=queue, run_jobs=False
    )
    worker = handlers.build_worker(settings, service, queue, extractor, governance, index, harvest)
    return Runtime(service, sessions, queue, worker, governance, index, harvest)


def serve_settings(settings: Settings) -> Settings:
    """``settings`` with ``workers`` decided for `quipu serve`: as set, or by default 2 on a
    machine with two or more CPUs (one process cannot use a second core for recall: Python's
    interpreter lock; measured in docs/benchmarks.md), else 1."""
    if settings.workers is not None:
        return settings
    return settings.model_copy(update={"workers": min(2, os.cpu_count() or 1)})


def hand_to_workers(settings: Settings) -> None:
    """Put ``settings`` where each `quipu serve --workers N` process reads them
    (:func:`handed_settings`)."""
    os.environ[SERVE_SETTINGS_ENV] = settings.model_dump_json()


def handed_settings() -> Settings:
    """The settings `quipu serve --workers N` handed to this worker process
    (:func:`hand_to_workers`): the parent resolved and checked them and ran the migrations."""
    raw = os.environ.get(SERVE_SETTINGS_ENV)
    if not raw:
        raise ConfigurationError(f"{SERVE_SETTINGS_ENV} is not set (started outside quipu serve?)")
    try:
        return Settings.model_validate_json(raw)
    except ValidationError as exc:
        raise ConfigurationError(f"{SERVE_SETTINGS_ENV} holds invalid settings: {exc}") from None
