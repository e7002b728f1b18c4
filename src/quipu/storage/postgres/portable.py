"""Sessions, the audit log, key/value entries and documents, whole, for export and import on
PostgreSQL (a mixin of :class:`PostgresStore`; OPS-2, issue 28). Imports are verbatim (same
sequence numbers, versions and times) and skip what is present, so running one twice adds
nothing."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import psycopg

from quipu.core.auth import AuditEvent
from quipu.core.kv import KVEntry, dump
from quipu.core.portable import PortableDocument, PortableSession
from quipu.core.records import Principal, Role
from quipu.core.sessions import SessionKey, SessionTurn, Watermark, turn_bytes
from quipu.storage.admission import admit, admit_turn
from quipu.storage.decode import decode_rows
from quipu.storage.postgres.control import insert_audit
from quipu.storage.postgres.documents import _DOC, _doc_params, _document, _stored
from quipu.storage.postgres.kv import _COLUMNS as _KV_COLUMNS
from quipu.storage.postgres.kv import _entry
from quipu.storage.postgres.rows import utc

_BY_KEY = "tenant_id = %s AND owner = %s AND session_id = %s"


class PortableTables:
    """Needs ``_conn()`` (an autocommit connection) and ``_tx()`` (one transaction)."""

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def export_sessions(self, tenant_id: str | None) -> Iterator[PortableSession]:
        where, params = _tenant(tenant_id)
        with self._conn() as conn:
            keys = conn.execute(
                f"SELECT tenant_id, owner, session_id FROM sessions {where} UNION"
                f" SELECT tenant_id, owner, session_id FROM session_watermarks {where}"
                " ORDER BY 1, 2, 3",
                params * 2,
            ).fetchall()
        for tenant, owner, session_id in keys:
            yield self._session(SessionKey(tenant, owner, session_id))

    def _session(self, key: SessionKey) -> PortableSession:
        ident = (key.tenant_id, key.owner, key.session_id)
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT key_id, role, agent_id, user_id FROM sessions WHERE {_BY_KEY}", ident
            ).fetchone()
            turns = conn.execute(
                "SELECT seq, role, content, metadata, created_at, expires_at, observed_at"
                f" FROM session_turns WHERE {_BY_KEY} ORDER BY seq",
                ident,
            ).fetchall()
            mark = conn.execute(
                "SELECT fingerprint, last_seq, status, at, details FROM session_watermarks"
                f" WHERE {_BY_KEY}",
                ident,
            ).fetchone()
        writer = None
        if row is not None:
            writer = Principal(key.tenant_id, row[0], Role(row[1]), agent_id=row[2], user_id=row[3])
        watermark = None
        if mark is not None:
            watermark = Watermark(mark[0], int(mark[1]), mark[2], utc(mark[3]), mark[4])
        return PortableSession(
            key,
            writer,
            tuple(
                SessionTurn(
                    key.session_id,
                    r[0],
                    r[1],
                    r[2],
                    r[3],
                    utc(r[4]),
                    utc(r[5]),
                    None if r[6] is None else utc(r[6]),  # when it was said (issue 24)
                )
                for r in turns
            ),
            watermark,
        )

    def import_sessions(self, sessions: Iterable[PortableSession]) -> int:
        added = 0
        for session in sessions:
            for turn in session.turns:
                admit_turn(turn.content, turn.metadata)
            with self._tx() as conn:
                added += _import_session(conn, session)
        return added

    def export_audit(self, tenant_id: str | None) -> Iterator[AuditEvent]:
        where, params = _tenant(tenant_id)
        with self._conn() as conn:
            cursor = conn.execute(
                "SELECT tenant_id, at, actor_key, role, agent_id, user_id, surface, action,"
                f" target_ids, reason, details FROM audit_log {where} ORDER BY seq",
                params,
            )
            for r in cursor:
                yield AuditEvent(
                    tenant_id=r[0],
                    at=utc(r[1]),
                    actor_key=r[2],
                    role=r[3],
                    agent_id=r[4],
                    user_id=r[5],
                    surface=r[6],
                    action=r[7],
                    target_ids=tuple(r[8]),
                    reason=r[9],
                    details=r[10],
                )

    def import_audit(self, events: Iterable[AuditEvent]) -> int:
        added = 0
        for event in events:
            admit(event)
            with self._tx() as conn:
                present = conn.execute(
                    "SELECT 1 FROM audit_log WHERE tenant_id = %s AND at = %s"
                    " AND actor_key = %s AND action = %s AND target_ids = %s",
                    (
                        event.tenant_id,
                        event.at,
                        event.actor_key,
                        event.action,
                        list(event.target_ids),
                    ),
                ).fetchone()
                if present is None:
                    insert_audit(conn, event)
                    added += 1
        return added

    # -- the key/value and documents planes (issue 28) -----------------------------------------
    def export_kv(self, tenant_id: str | None) -> Iterator[KVEntry]:
        """Every version of every key (erased ones too, wiped), by partition, key and version."""
        where, params = _tenant(tenant_id)
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_KV_COLUMNS} FROM kv_entries {where}"
                " ORDER BY tenant_id, scope, owner, key, version",
                params,
            ).fetchall()
        yield from decode_rows(_entry, rows, lambda r: r[3])

    def import_kv(self, entries: Iterable[KVEntry]) -> int:
        added = 0
        for entry in entries:
            admit(entry)
            with self._tx() as conn:
                added += conn.execute(
                    f"INSERT INTO kv_entries ({_KV_COLUMNS}, is_current) VALUES (%s, %s, %s,"
                    " %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (
                        entry.tenant_id,
                        entry.scope.value,
                        entry.owner,
                        entry.key,
                        entry.version,
                        dump(entry),
                        entry.status.value,
                        entry.actor,
                        entry.surface,
                        entry.agent_id,
                        entry.reason,
                        entry.recorded_at,
                        entry.ended_at,
                        entry.ended_at is None,
                    ),
                ).rowcount
        return added

    def export_documents(self, tenant_id: str | None) -> Iterator[PortableDocument]:
        """Every document (deleted and erased ones too) with its chunks, vectors and corpus."""
        where, params = _tenant(tenant_id)
        with self._conn() as conn:
            found = conn.execute(
                f"SELECT {_DOC} FROM documents {where}"
                " ORDER BY tenant_id, scope, owner, document_id",
                params,
            ).fetchall()
        for document in decode_rows(_document, found, lambda r: r[3]):
            part = (document.tenant_id, document.scope.value, document.owner)
            with self._conn() as conn:
                corpus = conn.execute(
                    "SELECT model_id, dimension FROM doc_corpora WHERE tenant_id = %s"
                    " AND scope = %s AND owner = %s",
                    part,
                ).fetchone()
                rows = conn.execute(
                    "SELECT key, document_id, seq, start_at, end_at, text, status, reason,"
                    " vector FROM doc_chunks WHERE tenant_id = %s AND scope = %s AND owner = %s"
                    " AND document_id = %s ORDER BY seq",
                    (*part, document.id),
                ).fetchall()
            chunks = decode_rows(_stored, rows, lambda r: r[0])
            yield PortableDocument(
                document,
                tuple(c.chunk for c in chunks),
                tuple(c.vector for c in chunks),
                (document.embedding_model, 0) if corpus is None else (corpus[0], int(corpus[1])),
            )

    def import_documents(self, documents: Iterable[PortableDocument]) -> int:
        """Write each document unless its id is in its scope already. Into a corpus pinned to
        another model the chunks come without vectors (not served until `quipu reindex
        --corpus`); an unpinned corpus takes the export's pin."""
        added = 0
        for item in documents:
            admit(item.document)
            for chunk in item.chunks:
                admit(chunk)
            with self._tx() as conn:
                added += _import_document(conn, item)
        return added


def _import_document(conn: psycopg.Connection[Any], item: PortableDocument) -> int:
    d = item.document
    part = (d.tenant_id, d.scope.value, d.owner)
    conn.execute(
        "INSERT INTO doc_corpora (tenant_id, scope, owner, model_id, dimension, generation)"
        " VALUES (%s, %s, %s, %s, %s, 0) ON CONFLICT DO NOTHING",
        (*part, *item.corpus),
    )
    pinned = conn.execute(
        "SELECT model_id, dimension FROM doc_corpora WHERE tenant_id = %s AND scope = %s"
        " AND owner = %s FOR UPDATE",
        part,
    ).fetchone()
    assert pinned is not None
    if conn.execute(
        "SELECT 1 FROM documents WHERE tenant_id = %s AND scope = %s AND owner = %s"
        " AND document_id = %s",
        (*part, d.id),
    ).fetchone():
        return 0
    keep = (str(pinned[0]), int(pinned[1])) == tuple(item.corpus)
    conn.execute(
        "UPDATE doc_corpora SET generation = generation + 1 WHERE tenant_id = %s AND scope = %s"
        " AND owner = %s",
        part,
    )
    conn.execute(
        f"INSERT INTO documents ({_DOC}) VALUES ({', '.join(['%s'] * 18)})", _doc_params(d)
    )
    conn.cursor().executemany(
        "INSERT INTO doc_chunks (tenant_id, scope, owner, document_id, seq, start_at, end_at,"
        " text, status, reason, vector) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        [
            (
                *part,
                d.id,
                chunk.seq,
                chunk.start,
                chunk.end,
                chunk.text,
                chunk.status.value,
                chunk.reason,
                None if vector is None or not keep else np.asarray(vector, np.float32).tobytes(),
            )
            for chunk, vector in zip(item.chunks, item.vectors, strict=True)
        ],
    )
    return 1


def _tenant(tenant_id: str | None) -> tuple[str, tuple[Any, ...]]:
    return ("", ()) if tenant_id is None else ("WHERE tenant_id = %s", (tenant_id,))


def _import_session(conn: psycopg.Connection[Any], session: PortableSession) -> int:
    key = session.key
    ident = (key.tenant_id, key.owner, key.session_id)
    turns = size = 0
    for turn in session.turns:
        meta = json.dumps(turn.metadata, sort_keys=True)
        inserted = conn.execute(
            "INSERT INTO session_turns (tenant_id, owner, session_id, seq, role, content,"
            " metadata, created_at, expires_at, observed_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (
                *ident,
                turn.seq,
                turn.role,
                turn.content,
                meta,
                turn.created_at,
                turn.expires_at,
                turn.observed_at,
            ),
        ).rowcount
        if inserted:
            turns += 1
            size += turn_bytes(turn.content, meta)
    writer = session.writer
    if writer is not None:
        conn.execute(
            "INSERT INTO sessions AS s (tenant_id, owner, session_id, turns, bytes, key_id, role,"
            " agent_id, user_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (tenant_id, owner, session_id) DO UPDATE SET"
            " turns = s.turns + excluded.turns, bytes = s.bytes + excluded.bytes",
            (
                *ident,
                turns,
                size,
                writer.key_id,
                writer.role.value,
                writer.agent_id,
                writer.user_id,
            ),
        )
    if turns:
        conn.execute(
            "INSERT INTO session_owners AS o (tenant_id, owner, turns, bytes)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT (tenant_id, owner) DO UPDATE SET"
            " turns = o.turns + excluded.turns, bytes = o.bytes + excluded.bytes",
            (key.tenant_id, key.owner, turns, size),
        )
    mark = session.watermark
    if mark is not None:
        conn.execute(
            "INSERT INTO session_watermarks (tenant_id, owner, session_id, fingerprint,"
            " last_seq, status, at, details) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING",
            (
                *ident,
                mark.fingerprint,
                mark.last_seq,
                mark.status,
                mark.at,
                json.dumps(mark.details, sort_keys=True),
            ),
        )
    return turns
