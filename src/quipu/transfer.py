"""JSON Lines export and import (API-4, OPS-2): lossless, versions, times, provenance and
vectors, and for a whole store its tenants, keys, sessions and audit log too.

Line 1 is a header; every later line is one record with a ``type``:

- ``version`` (format versions 1 and 2): one memory version. Vectors travel as base64 float32
  with the id of the model that made them, so an import into a store pinned to another model
  simply leaves them out (and the rows are re-embedded later) instead of mixing spaces.
- ``tenant``, ``credential`` (an API key or run token with the SHA-256 of its secret, never
  the secret), ``project`` (a registered project, SCOPE-6), ``hold`` (a legal hold, active or
  released, LIFE-4), ``session`` (a session's writer, turns and promotion watermark) and
  ``audit`` (one audit event): format version 2, written by ``quipu export``
  (:mod:`quipu.portability`); ``snapshot`` (a snapshot's pinned versions, LIFE-8) too.
- ``kv`` (one version of a key of the key/value plane, KV-1) and ``document`` (a document of
  the documents plane with every chunk, its offsets, status and vector, and the model its
  scope's corpus is pinned to, DOC-1): format version 2 as well (issue 28).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import IO, Any

import numpy as np

from quipu.core import kv
from quipu.core.auth import AuditEvent, Credential, Tenant
from quipu.core.documents import Chunk, ChunkStatus, Document, DocumentStatus, MediaType
from quipu.core.governance import Hold, HoldKind, Project, Snapshot, SnapshotMember
from quipu.core.kv import EntryStatus, KVEntry
from quipu.core.portable import PortableDocument, PortableSession
from quipu.core.records import MemoryVersion, Principal, Role, Scope
from quipu.core.sessions import SessionKey, SessionTurn, Watermark
from quipu.errors import InvalidInput
from quipu.storage.base import Vector

FORMAT = "quipu-export"
#: Version 1: versions only (``GET /v1/export``). Version 2: the whole store (``quipu export``).
FORMAT_VERSION = 1
STORE_FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
RECORD_TYPES = (
    "tenant",
    "credential",
    "project",
    "hold",
    "version",
    "session",
    "audit",
    "snapshot",
    "kv",
    "document",
)


def header(version: int = FORMAT_VERSION, **extra: Any) -> dict[str, Any]:
    return {"type": "header", "format": FORMAT, "version": version, **extra}


def encode(memory: MemoryVersion, vector: Vector | None) -> dict[str, Any]:
    row = memory.to_dict()
    row.update(type="version", tenant_id=memory.tenant_id, owner=memory.owner)
    row["vector"] = (
        None
        if vector is None
        else base64.b64encode(np.asarray(vector, np.float32).tobytes()).decode()
    )
    return row


def decode(row: dict[str, Any]) -> tuple[MemoryVersion, Vector | None]:
    try:
        memory = MemoryVersion.from_dict(
            row, tenant_id=str(row["tenant_id"]), owner=str(row["owner"])
        )
        blob = row.get("vector")
        vector = None if blob is None else np.frombuffer(base64.b64decode(blob), dtype=np.float32)
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(
            f"an export line is malformed: {exc}",
            code="invalid_export",
            details={"id": row.get("id")},
        ) from None
    return memory, vector


def write(out: IO[str], items: Iterable[tuple[MemoryVersion, Vector | None]]) -> Iterator[int]:
    """Write the header and each version; yields after each line so callers can show progress."""
    out.write(json.dumps(header()) + "\n")
    for n, (memory, vector) in enumerate(items, start=1):
        out.write(json.dumps(encode(memory, vector), ensure_ascii=False) + "\n")
        yield n


def read(lines: Iterable[str]) -> Iterator[tuple[MemoryVersion, Vector | None]]:
    """The versions of an export (other records are skipped); the header must come first."""
    for kind, value in read_records(lines):
        if kind == "version":
            yield value


def read_records(lines: Iterable[str], *, with_header: bool = False) -> Iterator[tuple[str, Any]]:
    """Parse an export into ``(type, value)`` pairs: a version as ``(memory, vector)``, a
    tenant as :class:`Tenant`, a credential as ``(Credential, secret_hash)``, a session as
    :class:`PortableSession`, an audit event as :class:`AuditEvent`. A malformed line is 422
    ``invalid_export`` naming its line number. ``with_header``: the header first, as
    ``("header", dict)``."""
    for _, kind, value in read_lines(lines, with_header=with_header):
        if kind == REFUSED:
            raise value
        yield kind, value


#: The type :func:`read_lines` gives a line it could not decode (its value: the error).
REFUSED = "refused"


def read_lines(
    lines: Iterable[str], *, with_header: bool = False
) -> Iterator[tuple[int, str, Any]]:
    """:func:`read_records` with each record's line number, going on past a malformed line:
    it comes as ``(number, REFUSED, InvalidInput)``. A missing or unknown header still
    raises (then nothing in the file is an export's record)."""
    it = iter(lines)
    first = next(it, "")
    try:
        head = json.loads(first) if first.strip() else {}
    except json.JSONDecodeError:
        head = {}
    if (
        not isinstance(head, dict)
        or head.get("format") != FORMAT
        or head.get("version") not in READABLE_VERSIONS
    ):
        raise InvalidInput("not a Quipu export (missing or unknown header)", code="invalid_export")
    if with_header:
        yield 1, "header", head
    for number, line in enumerate(it, start=2):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            yield (
                number,
                REFUSED,
                InvalidInput(f"line {number} of the export is not JSON", code="invalid_export"),
            )
            continue
        kind = row.get("type") if isinstance(row, dict) else None
        if kind not in RECORD_TYPES:
            yield (
                number,
                REFUSED,
                InvalidInput(
                    f"line {number} is not a record of a Quipu export", code="invalid_export"
                ),
            )
            continue
        try:
            value = _DECODERS[kind](row)
        except InvalidInput as exc:
            value, kind = (
                InvalidInput(
                    f"line {number}: {exc.message}", code="invalid_export", details=exc.details
                ),
                REFUSED,
            )
        yield number, kind, value


# -- the records of a whole-store export (format version 2) -----------------------------------
def encode_tenant(tenant: Tenant) -> dict[str, Any]:
    return {
        "type": "tenant",
        "tenant_id": tenant.tenant_id,
        "name": tenant.name,
        "created_at": tenant.created_at.isoformat(),
    }


def encode_credential(credential: Credential, secret_hash: str) -> dict[str, Any]:
    return {"type": "credential", **credential.to_dict(), "secret_hash": secret_hash}


def encode_session(session: PortableSession) -> dict[str, Any]:
    writer = session.writer
    mark = session.watermark
    return {
        "type": "session",
        "tenant_id": session.key.tenant_id,
        "owner": session.key.owner,
        "session_id": session.key.session_id,
        "writer": None
        if writer is None
        else {
            "key_id": writer.key_id,
            "role": writer.role.value,
            "agent_id": writer.agent_id,
            "user_id": writer.user_id,
        },
        "turns": [t.to_dict() for t in session.turns],
        "watermark": None
        if mark is None
        else {
            "fingerprint": mark.fingerprint,
            "last_seq": mark.last_seq,
            "status": mark.status,
            "at": mark.at.isoformat(),
            "details": mark.details,
        },
    }


def encode_audit(event: AuditEvent) -> dict[str, Any]:
    row = event.to_dict()
    row.pop("seq", None)  # the importing store numbers its own log
    return {"type": "audit", **row}


def _decode_version(row: dict[str, Any]) -> tuple[MemoryVersion, Vector | None]:
    return decode(row)


def _decode_tenant(row: dict[str, Any]) -> Tenant:
    try:
        return Tenant(str(row["tenant_id"]), str(row["name"]), _at(row["created_at"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise _malformed("tenant", exc) from None


def _decode_credential(row: dict[str, Any]) -> tuple[Credential, str]:
    try:
        credential = Credential(
            tenant_id=str(row["tenant_id"]),
            key_id=str(row["key_id"]),
            kind=str(row["kind"]),
            role=Role(row["role"]),
            created_at=_at(row["created_at"]),
            name=_text(row.get("name")),
            agent_id=_text(row.get("agent_id")),
            user_id=_text(row.get("user_id")),
            grants=frozenset(str(g) for g in row.get("grants") or ()),
            parent_key_id=_text(row.get("parent_key_id")),
            expires_at=_at_opt(row.get("expires_at")),
            revoked_at=_at_opt(row.get("revoked_at")),
            last_used_at=_at_opt(row.get("last_used_at")),
        )
        secret_hash = str(row["secret_hash"])
    except (KeyError, TypeError, ValueError) as exc:
        raise _malformed("credential", exc) from None
    if len(secret_hash) != 64 or any(c not in "0123456789abcdef" for c in secret_hash):
        raise InvalidInput("a credential's secret_hash is not a SHA-256", code="invalid_export")
    return credential, secret_hash


def _said(turn: dict[str, Any]) -> datetime | None:
    """A turn's ``observed_at`` (issue 24) as the file has it (``None`` when it has none): the
    moved store answers exactly what the old one did (OPS-2)."""
    raw = turn.get("observed_at")
    return None if raw is None else _at(raw)


def _decode_session(row: dict[str, Any]) -> PortableSession:
    try:
        key = SessionKey(str(row["tenant_id"]), str(row["owner"]), str(row["session_id"]))
        who = row.get("writer")
        writer = None
        if who is not None:
            writer = Principal(
                key.tenant_id,
                str(who["key_id"]),
                Role(who["role"]),
                agent_id=_text(who.get("agent_id")),
                user_id=_text(who.get("user_id")),
            )
        turns = tuple(
            SessionTurn(
                key.session_id,
                int(t["seq"]),
                str(t["role"]),
                str(t["content"]),
                dict(t.get("metadata") or {}),
                _at(t["created_at"]),
                _at(t["expires_at"]),
                _said(t),
            )
            for t in row.get("turns") or ()
        )
        mark = row.get("watermark")
        watermark = None
        if mark is not None:
            watermark = Watermark(
                str(mark["fingerprint"]),
                int(mark["last_seq"]),
                str(mark["status"]),
                _at(mark["at"]),
                dict(mark.get("details") or {}),
            )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _malformed("session", exc) from None
    return PortableSession(key, writer, turns, watermark)


def _decode_audit(row: dict[str, Any]) -> AuditEvent:
    try:
        return AuditEvent(
            tenant_id=str(row["tenant_id"]),
            at=_at(row["at"]),
            actor_key=str(row["actor_key"]),
            surface=str(row["surface"]),
            action=str(row["action"]),
            target_ids=tuple(str(t) for t in row.get("target_ids") or ()),
            role=_text(row.get("role")),
            agent_id=_text(row.get("agent_id")),
            user_id=_text(row.get("user_id")),
            reason=_text(row.get("reason")),
            details=dict(row.get("details") or {}),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise _malformed("audit event", exc) from None


def encode_project(project: Project) -> dict[str, Any]:
    return {"type": "project", "tenant_id": project.tenant_id, **project.to_dict()}


def encode_hold(hold: Hold) -> dict[str, Any]:
    return {
        "type": "hold",
        "tenant_id": hold.tenant_id,
        "hold_id": hold.hold_id,
        "kind": hold.kind.value,
        "target": hold.target,
        "reason": hold.reason,
        "created_by": hold.created_by,
        "created_at": hold.created_at.isoformat(),
        "released_by": hold.released_by,
        "released_at": None if hold.released_at is None else hold.released_at.isoformat(),
        "release_reason": hold.release_reason,
    }


def _decode_project(row: dict[str, Any]) -> Project:
    try:
        return Project(
            tenant_id=str(row["tenant_id"]),
            project_id=str(row["project_id"]),
            name=_text(row.get("name")),
            created_by=str(row["created_by"]),
            created_at=_at(row["created_at"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise _malformed("project", exc) from None


def _decode_hold(row: dict[str, Any]) -> Hold:
    try:
        hold = Hold(
            tenant_id=str(row["tenant_id"]),
            hold_id=str(row["hold_id"]),
            kind=HoldKind(str(row["kind"])),
            target=str(row["target"]),
            reason=str(row["reason"]),
            created_by=str(row["created_by"]),
            created_at=_at(row["created_at"]),
            released_by=_text(row.get("released_by")),
            released_at=_at_opt(row.get("released_at")),
            release_reason=_text(row.get("release_reason")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise _malformed("hold", exc) from None
    released = (hold.released_by, hold.released_at, hold.release_reason)
    if any(v is None for v in released) and any(v is not None for v in released):
        raise _malformed("hold", ValueError("released_by, released_at, release_reason go together"))
    return hold


_DECODERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "version": _decode_version,
    "tenant": _decode_tenant,
    "credential": _decode_credential,
    "project": _decode_project,
    "hold": _decode_hold,
    "session": _decode_session,
    "audit": _decode_audit,
}


# -- the key/value and documents planes (issue 28) --------------------------------------------
def encode_kv(entry: KVEntry) -> dict[str, Any]:
    return {"type": "kv", "tenant_id": entry.tenant_id, "owner": entry.owner, **entry.to_dict()}


def encode_document(item: PortableDocument) -> dict[str, Any]:
    d = item.document
    return {
        "type": "document",
        "tenant_id": d.tenant_id,
        "owner": d.owner,
        **d.to_dict(),
        "corpus": {"model_id": item.corpus[0], "dimension": item.corpus[1]},
        "chunk_list": [
            {
                "seq": c.seq,
                "start": c.start,
                "end": c.end,
                "text": c.text,
                "status": c.status.value,
                "reason": c.reason,
                "vector": None
                if v is None
                else base64.b64encode(np.asarray(v, np.float32).tobytes()).decode(),
            }
            for c, v in zip(item.chunks, item.vectors, strict=True)
        ],
    }


def _decode_kv(row: dict[str, Any]) -> KVEntry:
    try:
        status = EntryStatus(str(row["status"]))
        value = row.get("value")
        if status is not EntryStatus.SET and value is not None:
            raise ValueError("only a set version holds a value")
        entry = KVEntry(
            tenant_id=str(row["tenant_id"]),
            scope=Scope(str(row["scope"])),
            owner=str(row["owner"]),
            key=str(row["key"]),
            version=_count(row["version"], low=1),
            value=value,
            status=status,
            actor=_text(row.get("actor")) or "",
            surface=str(row["surface"]),
            agent_id=_text(row.get("agent_id")),
            reason=_text(row.get("reason")),
            recorded_at=_at(row["recorded_at"]),
            ended_at=_at_opt(row.get("ended_at")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise _malformed("key/value", exc) from None
    try:
        kv.key(entry.key)
        if status is EntryStatus.SET:
            kv.value(entry.value, max_bytes=_MAX_KV_BYTES)
    except InvalidInput as exc:
        raise _malformed("key/value", ValueError(exc.message)) from None
    return entry


def _decode_document(row: dict[str, Any]) -> PortableDocument:
    try:
        corpus = row["corpus"]
        pin = (str(corpus["model_id"]), _count(corpus["dimension"], low=0))
        document = Document(
            id=str(row["id"]),
            tenant_id=str(row["tenant_id"]),
            scope=Scope(str(row["scope"])),
            owner=str(row["owner"]),
            title=str(row["title"]),
            media_type=MediaType(str(row["media_type"])),
            metadata=_object(row.get("metadata")),
            chars=_count(row["chars"], low=0),
            chunks=_count(row["chunks"], low=0),
            status=DocumentStatus(str(row["status"])),
            version=_count(row["version"], low=1),
            actor=str(row["actor"]),
            surface=str(row["surface"]),
            agent_id=_text(row.get("agent_id")),
            recorded_at=_at(row["recorded_at"]),
            embedding_model=str(row["embedding_model"]),
            reason=_text(row.get("reason")),
            withheld=[_object(w) for w in row.get("withheld") or ()],
        )
        chunks: list[Chunk] = []
        vectors: list[Any] = []
        for c in row.get("chunk_list") or ():
            chunk = Chunk(
                seq=_count(c["seq"], low=0),
                start=_count(c["start"], low=0),
                end=_count(c["end"], low=0),
                text=str(c["text"]),
                status=ChunkStatus(str(c["status"])),
                reason=_text(c.get("reason")),
            )
            if not chunk.start <= chunk.end <= document.chars:
                raise ValueError(f"chunk {chunk.seq} lies outside the document")
            chunks.append(chunk)
            vectors.append(_vector(c.get("vector"), pin[1], chunk.status))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _malformed("document", exc) from None
    if len({c.seq for c in chunks}) != len(chunks):
        raise _malformed("document", ValueError("two chunks share a seq"))
    return PortableDocument(document, tuple(chunks), tuple(vectors), pin)


#: The largest key/value an import takes (the service's own bound is smaller or equal).
_MAX_KV_BYTES = 1 << 20


def _vector(blob: Any, dimension: int, status: ChunkStatus) -> Any:
    if blob is None:
        return None
    if status is not ChunkStatus.ACTIVE:
        raise ValueError("only a served chunk has a vector")
    vector = np.frombuffer(base64.b64decode(str(blob), validate=True), dtype=np.float32)
    if vector.shape != (dimension,) or not np.all(np.isfinite(vector)):
        raise ValueError(f"a chunk's vector is not {dimension} finite numbers")
    return vector


def _count(value: Any, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < 2**31:
        raise ValueError(f"{value!r} is not a count")
    return value


def _object(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


_DECODERS["kv"] = _decode_kv
_DECODERS["document"] = _decode_document


def _at(value: Any) -> datetime:
    moment = datetime.fromisoformat(str(value))
    if moment.tzinfo is None:
        raise ValueError(f"{value!r} has no time zone")
    return moment


def _at_opt(value: Any) -> datetime | None:
    return None if value is None else _at(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _malformed(what: str, exc: Exception) -> InvalidInput:
    return InvalidInput(f"a {what} record is malformed: {exc}", code="invalid_export")


# -- snapshots (LIFE-8) ------------------------------------------------------------------------
def encode_snapshot(snapshot: Snapshot) -> dict[str, Any]:
    return {"type": "snapshot", "tenant_id": snapshot.tenant_id, **snapshot.to_dict()}


def _decode_snapshot(row: dict[str, Any]) -> Snapshot:
    try:
        members = row["members"]
        if not isinstance(members, list):
            raise TypeError("members is not a list")
        return Snapshot(
            tenant_id=str(row["tenant_id"]),
            snapshot_id=str(row["snapshot_id"]),
            label=_text(row.get("label")),
            created_by=str(row["created_by"]),
            created_at=_at(row["created_at"]),
            members=tuple(SnapshotMember(str(m["id"]), int(m["version"])) for m in members),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise _malformed("snapshot", exc) from None


_DECODERS["snapshot"] = _decode_snapshot
