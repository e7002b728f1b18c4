"""Moving a whole store, or one tenant of it (OPS-2, API-4): ``quipu export`` / ``quipu import``.

An export is JSON Lines in format version 2 (:mod:`quipu.transfer`): a header naming the tenant
(or none: the whole store), then the tenants, their credentials (hashed secrets only), their
registered projects and legal holds (released ones too), every memory version with its vector,
the sessions (writer, turns, watermark), every version of every key of the key/value plane,
every document of the documents plane with its chunks and vectors, the audit log and the
snapshots (LIFE-8), in that order. An import writes each record into the target store verbatim
and skips what is already there, so it can be re-run, and an interrupted one finished, without
doubles.

The memory versions go through :meth:`MemoryService.import_` (screened like any write, one
``memory.import`` audit event per tenant); tenants, credentials, projects, holds, sessions,
key/value versions, documents and audit events go straight to the store, which checks every
string it is given (``storage.admission``); a released hold is written, then released with its
own reason. A document's vectors are kept when its scope's corpus is unpinned or pinned to the
same model; otherwise its chunks come without vectors until ``quipu reindex --corpus``. This
is the operator's tool: it runs on the store's own machine, never through a request.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import IO, Any

from quipu import transfer
from quipu.core.governance import Hold
from quipu.core.records import MemoryVersion, Principal, Role
from quipu.errors import InvalidInput, QuipuError
from quipu.memories import MemoryService
from quipu.storage.base import EmbeddingPin, Store, Vector

#: Called after each record with its type and how many of that type were handled so far.
Progress = Callable[[str, int], None]


@dataclass
class Counts:
    """Records by type: written by an export, or read and added by an import."""

    read: dict[str, int] = field(default_factory=dict)
    added: dict[str, int] = field(default_factory=dict)

    def saw(self, kind: str, added: int, progress: Progress | None) -> None:
        self.read[kind] = self.read.get(kind, 0) + 1
        self.added[kind] = self.added.get(kind, 0) + added
        if progress is not None:
            progress(kind, self.read[kind])


def export_records(store: Store, tenant_id: str | None) -> Iterator[dict[str, Any]]:
    """The records of an export of ``tenant_id`` (``None``: every tenant), header first."""
    pin = store.embedding_pin()
    yield transfer.header(
        transfer.STORE_FORMAT_VERSION,
        tenant=tenant_id,
        embedding=None if pin is None else {"model_id": pin.model_id, "dimension": pin.dimension},
    )
    if tenant_id is None:
        tenants = store.list_tenants()
    else:
        found = store.get_tenant(tenant_id)
        tenants = [] if found is None else [found]
    for tenant in tenants:
        yield transfer.encode_tenant(tenant)
    for tenant in tenants:
        for credential in store.list_credentials(tenant.tenant_id):
            stored = store.find_credential(credential.key_id)
            if stored is not None:
                yield transfer.encode_credential(stored[0], stored[1])
    for tenant in tenants:
        for project in store.list_projects(tenant.tenant_id):
            yield transfer.encode_project(project)
        for hold in store.list_holds(tenant.tenant_id, include_released=True):
            yield transfer.encode_hold(hold)
    for memory, vector in store.export_versions(tenant_id):
        yield transfer.encode(memory, vector)
    for session in store.export_sessions(tenant_id):
        yield transfer.encode_session(session)
    for entry in store.export_kv(tenant_id):
        yield transfer.encode_kv(entry)
    for document in store.export_documents(tenant_id):
        yield transfer.encode_document(document)
    for event in store.export_audit(tenant_id):
        yield transfer.encode_audit(event)
    for snapshot in store.export_snapshots(tenant_id):
        yield transfer.encode_snapshot(snapshot)


def write_export(
    out: IO[str], store: Store, tenant_id: str | None, progress: Progress | None = None
) -> Counts:
    counts = Counts()
    for record in export_records(store, tenant_id):
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        if record["type"] != "header":
            counts.saw(record["type"], 1, progress)
    out.flush()
    return counts


@dataclass(frozen=True)
class Refused:
    """A record an import left out: its line in the file, its type, and why (the error's
    stable code and message; never the record's content)."""

    line: int
    kind: str
    code: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "type": self.kind, "code": self.code, "message": self.message}


def import_records(
    service: MemoryService,
    importer: Principal,
    lines: Iterable[str],
    *,
    tenant_id: str | None = None,
    progress: Progress | None = None,
    on_refused: Callable[[Refused], None] | None = None,
) -> Counts:
    """Import an export (format 1 or 2) into ``service``'s store. ``importer`` names who
    imports (its key and surface in the audit); its tenant is replaced by each record's own.
    With ``tenant_id`` only that tenant's records are taken. Without ``on_refused`` the first
    record refused (malformed, or failing a write's screens) raises; with it, each refused
    record is reported and left out (a version takes its whole family with it) and the rest
    is imported."""
    store = service.store
    counts = Counts()
    versions: list[tuple[MemoryVersion, Vector | None]] = []
    numbers: list[int] = []
    batch_tenant: str | None = None

    def refuse(line: int, kind: str, error: QuipuError) -> None:
        if on_refused is None:
            raise error
        on_refused(Refused(line, kind, error.code, error.message))

    def flush() -> None:
        nonlocal versions, numbers
        if versions and batch_tenant is not None:
            who = replace(importer, tenant_id=batch_tenant, role=Role.SUPERADMIN)
            at = numbers
            added = service.import_(
                who,
                versions,
                on_refused=None
                if on_refused is None
                else lambda position, _id, error: refuse(at[position - 1], "version", error),
            )
            counts.added["version"] = counts.added.get("version", 0) + added
        versions, numbers = [], []

    for number, kind, value in transfer.read_lines(lines, with_header=True):
        if kind == "header":
            _pin(store, value)
            continue
        if kind == transfer.REFUSED:
            refuse(number, kind, value)
            continue
        owner = _tenant_of(kind, value)
        if tenant_id is not None and owner != tenant_id:
            continue
        if kind == "version":
            if owner != batch_tenant:
                flush()
                batch_tenant = owner
            versions.append(value)
            numbers.append(number)
            counts.saw(kind, 0, progress)
            if len(versions) >= 1000:
                flush()
            continue
        flush()
        try:
            added = _add(store, kind, value)
        except InvalidInput as exc:  # a screen or a stored-string rule, this record alone
            refuse(number, kind, exc)
            added = 0
        counts.saw(kind, added, progress)
    flush()
    return counts


def _pin(store: Store, head: dict[str, Any]) -> None:
    """Pin an unpinned target to the model the export's vectors were made with, so they are
    kept (a store pinned to another model keeps none: they are re-embedded by reindex)."""
    given = head.get("embedding")
    if store.embedding_pin() is not None or not isinstance(given, dict):
        return
    try:
        pin = EmbeddingPin(str(given["model_id"]), int(given["dimension"]))
    except (KeyError, TypeError, ValueError):
        raise InvalidInput(
            "the export's header names its embedding model wrongly", code="invalid_export"
        ) from None
    store.pin_embedding(pin)


def _tenant_of(kind: str, value: Any) -> str:
    if kind == "version":
        return str(value[0].tenant_id)
    if kind == "credential":
        return str(value[0].tenant_id)
    if kind == "session":
        return str(value.key.tenant_id)
    if kind == "document":
        return str(value.document.tenant_id)
    return str(value.tenant_id)


def _add(store: Store, kind: str, value: Any) -> int:
    """Write one non-version record unless present; 1 when it was added."""
    if kind == "tenant":
        if store.get_tenant(value.tenant_id) is not None:
            return 0
        store.create_tenant(value)
        return 1
    if kind == "credential":
        credential, secret_hash = value
        if store.find_credential(credential.key_id) is not None:
            return 0
        store.insert_credential(credential, secret_hash)
        return 1
    if kind == "project":
        if store.has_project(value.tenant_id, value.project_id):
            return 0
        store.put_project(value)
        return 1
    if kind == "hold":
        return _add_hold(store, value)
    if kind == "session":
        return 1 if store.import_sessions([value]) else 0
    if kind == "snapshot":
        if store.get_snapshot(value.tenant_id, value.snapshot_id) is not None:
            return 0
        store.put_snapshot(value)
        return 1

    if kind == "kv":
        return store.import_kv([value])
    if kind == "document":
        return store.import_documents([value])
    return store.import_audit([value])


def _add_hold(store: Store, hold: Hold) -> int:
    """A legal hold unless its id is there; a released one is released again as recorded."""
    held = store.list_holds(hold.tenant_id, include_released=True)
    if any(h.hold_id == hold.hold_id for h in held):
        return 0
    store.put_hold(replace(hold, released_by=None, released_at=None, release_reason=None))
    by, at, why = hold.released_by, hold.released_at, hold.release_reason
    if by is not None and at is not None and why is not None:  # all or none (decoded so)
        store.release_hold(hold.tenant_id, hold.hold_id, by, at, why)
    return 1
