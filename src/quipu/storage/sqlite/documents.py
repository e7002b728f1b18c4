"""The documents plane on SQLite (a mixin of :class:`SQLiteStore`; DOC-1).

A document's chunks, vectors, corpus pin and audit line are written in one ``BEGIN IMMEDIATE``
transaction; the corpus row's ``generation`` moves with every add and delete, so an in-process
search index knows when to reload.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager

import numpy as np

from quipu.core.auth import AuditEvent
from quipu.core.documents import (
    Chunk,
    ChunkStatus,
    Document,
    DocumentStatus,
    MediaType,
    StoredChunk,
    check_corpus,
)
from quipu.core.graph import ChunkMirror
from quipu.core.records import Scope, ScopeRef
from quipu.storage.admission import admit
from quipu.storage.base import EmbeddingPin, Vector
from quipu.storage.decode import decode_rows, loads
from quipu.storage.graph_rows import mirror_chunks
from quipu.storage.sqlite.control import insert_audit
from quipu.storage.sqlite.graph import graph_sql
from quipu.storage.sqlite.kv import SUBJECT_SQL
from quipu.storage.subject import subject_rows
from quipu.storage.timecodec import from_micros, to_micros

_DOC = (
    "tenant_id, scope, owner, document_id, title, media_type, metadata, chars, chunks, status,"
    " version, actor, surface, agent_id, reason, recorded_at, embedding_model, withheld"
)
_PART = "tenant_id = ? AND scope = ? AND owner = ?"


class DocumentTables:
    """Needs the store's ``_tx()`` and ``_reader()``."""

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    def doc_add(
        self,
        ref: ScopeRef,
        document: Document,
        chunks: Sequence[Chunk],
        vectors: Sequence[Vector | None],
        pin: EmbeddingPin,
        audit: AuditEvent,
        graph: ChunkMirror | None = None,
    ) -> Document:
        admit(document)
        for chunk in chunks:
            admit(chunk)
        with self._tx() as c:
            _pin(c, ref, pin)
            c.execute(
                f"INSERT INTO documents ({_DOC}) VALUES ({', '.join('?' * 18)})",
                _doc_params(document),
            )
            c.executemany(
                "INSERT INTO doc_chunks (tenant_id, scope, owner, document_id, seq, start_at,"
                " end_at, text, status, reason, vector) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        *_part(ref),
                        document.id,
                        chunk.seq,
                        chunk.start,
                        chunk.end,
                        chunk.text,
                        chunk.status.value,
                        chunk.reason,
                        None if vector is None else np.asarray(vector, np.float32).tobytes(),
                    )
                    for chunk, vector in zip(chunks, vectors, strict=True)
                ],
            )
            mirror_chunks(graph_sql(c), ref, graph, document.recorded_at)  # GRAPH-1
            insert_audit(c, audit)
        return document

    def doc_delete(
        self, ref: ScopeRef, document_id: str, audit: AuditEvent, reason: str | None
    ) -> Document | None:
        admit(audit)
        with self._tx() as c:
            row = c.execute(
                f"SELECT {_DOC} FROM documents WHERE {_PART} AND document_id = ?"
                " AND status = 'active'",
                (*_part(ref), document_id),
            ).fetchone()
            if row is None:
                return None
            c.execute(
                "UPDATE documents SET status = 'deleted', version = version + 1, reason = ?"
                f" WHERE {_PART} AND document_id = ?",
                (reason, *_part(ref), document_id),
            )
            c.execute(
                f"UPDATE doc_chunks SET vector = NULL WHERE {_PART} AND document_id = ?",
                (*_part(ref), document_id),
            )
            c.execute(
                f"UPDATE doc_corpora SET generation = generation + 1 WHERE {_PART}", _part(ref)
            )
            insert_audit(c, audit)
            found = c.execute(
                f"SELECT {_DOC} FROM documents WHERE {_PART} AND document_id = ?",
                (*_part(ref), document_id),
            ).fetchall()
        docs = decode_rows(_document, found, lambda r: r["document_id"])
        return docs[0] if docs else None

    def doc_erase(self, ref: ScopeRef, document_id: str, audit: AuditEvent) -> int:
        admit(audit)
        with self._tx() as c:
            found = c.execute(
                f"SELECT chunks FROM documents WHERE {_PART} AND document_id = ?"
                " AND status != 'erased'",
                (*_part(ref), document_id),
            ).fetchone()
            if found is None:
                return 0
            gone = c.execute(
                f"DELETE FROM doc_chunks WHERE {_PART} AND document_id = ?",
                (*_part(ref), document_id),
            ).rowcount
            c.execute(
                "UPDATE documents SET title = '', metadata = '{}', withheld = '[]', reason = NULL,"
                f" status = 'erased', version = version + 1 WHERE {_PART} AND document_id = ?",
                (*_part(ref), document_id),
            )
            c.execute(
                "UPDATE audit_log SET reason = NULL WHERE tenant_id = ?"
                " AND action IN ('document.add', 'document.delete') AND target_ids = ?",
                (ref.tenant_id, json.dumps([document_id])),
            )
            c.execute(
                f"UPDATE doc_corpora SET generation = generation + 1 WHERE {_PART}", _part(ref)
            )
            insert_audit(c, audit)
            return int(gone)

    def doc_get(self, ref: ScopeRef, document_id: str) -> Document | None:
        rows = (
            self._reader()
            .execute(
                f"SELECT {_DOC} FROM documents WHERE {_PART} AND document_id = ?",
                (*_part(ref), document_id),
            )
            .fetchall()
        )
        docs = decode_rows(_document, rows, lambda r: r["document_id"])
        return docs[0] if docs else None

    def doc_list(self, ref: ScopeRef, after: str | None, limit: int) -> list[Document]:
        rows = (
            self._reader()
            .execute(
                f"SELECT {_DOC} FROM documents WHERE {_PART} AND status = 'active'"
                " AND document_id > ? ORDER BY document_id LIMIT ?",
                (*_part(ref), after or "", limit),
            )
            .fetchall()
        )
        return decode_rows(_document, rows, lambda r: r["document_id"])

    def doc_corpus(self, ref: ScopeRef) -> tuple[EmbeddingPin, int] | None:
        row = (
            self._reader()
            .execute(
                f"SELECT model_id, dimension, generation FROM doc_corpora WHERE {_PART}",
                _part(ref),
            )
            .fetchone()
        )
        if row is None:
            return None
        return EmbeddingPin(str(row[0]), int(row[1])), int(row[2])

    def doc_served(self, ref: ScopeRef) -> list[StoredChunk]:
        """Every served chunk (active, of an active document) of the corpus, with its vector."""
        rows = (
            self._reader()
            .execute(
                "SELECT c.key, c.document_id, c.seq, c.start_at, c.end_at, c.text, c.status,"
                " c.reason, c.vector FROM doc_chunks c JOIN documents d ON d.tenant_id ="
                " c.tenant_id AND d.scope = c.scope AND d.owner = c.owner AND d.document_id ="
                " c.document_id WHERE c.tenant_id = ? AND c.scope = ? AND c.owner = ?"
                " AND c.status = 'active' AND d.status = 'active' AND c.vector IS NOT NULL"
                " ORDER BY c.key",
                _part(ref),
            )
            .fetchall()
        )
        return decode_rows(_stored, rows, lambda r: r[0])

    def doc_chunks(
        self, ref: ScopeRef, document_id: str, start: int = 0, end: int = 2**62
    ) -> list[StoredChunk]:
        """The chunks of one document overlapping ``[start, end)``, in order, without vectors."""
        rows = (
            self._reader()
            .execute(
                "SELECT key, document_id, seq, start_at, end_at, text, status, reason, NULL"
                f" FROM doc_chunks WHERE {_PART} AND document_id = ? AND end_at > ?"
                " AND start_at < ? ORDER BY seq",
                (*_part(ref), document_id, start, end),
            )
            .fetchall()
        )
        return decode_rows(_stored, rows, lambda r: r[0])

    def doc_subject_ids(
        self, tenant_id: str, user_id: str, limit: int
    ) -> list[tuple[ScopeRef, str]]:
        """Up to ``limit`` documents not yet erased in ``user_id``'s ``user`` and
        ``agent_user`` partitions (a subject erasure's next batch)."""
        rows = self._reader().execute(
            "SELECT scope, owner, document_id FROM documents WHERE tenant_id = ?"
            f" AND status != 'erased' AND ({SUBJECT_SQL}) ORDER BY scope, owner, document_id"
            " LIMIT ?",
            (tenant_id, user_id, user_id, limit),
        )
        return subject_rows(tenant_id, user_id, rows)

    # -- re-indexing a corpus (`quipu reindex --corpus`) ----------------------------------------
    def doc_corpora(self, tenant_id: str | None) -> list[tuple[ScopeRef, EmbeddingPin]]:
        """Every corpus (of one tenant, or all) with its pinned model."""
        where, args = ("", ()) if tenant_id is None else (" WHERE tenant_id = ?", (tenant_id,))
        rows = (
            self._reader()
            .execute(
                "SELECT tenant_id, scope, owner, model_id, dimension FROM doc_corpora"
                f"{where} ORDER BY tenant_id, scope, owner",
                args,
            )
            .fetchall()
        )
        return [
            (ScopeRef(r[0], Scope(r[1]), r[2]), EmbeddingPin(str(r[3]), int(r[4]))) for r in rows
        ]

    def doc_servable(self, ref: ScopeRef) -> list[StoredChunk]:
        """Every chunk search would serve once embedded (active, of an active document), with
        its vector or ``None``."""
        rows = (
            self._reader()
            .execute(
                "SELECT c.key, c.document_id, c.seq, c.start_at, c.end_at, c.text, c.status,"
                " c.reason, c.vector FROM doc_chunks c JOIN documents d ON d.tenant_id ="
                " c.tenant_id AND d.scope = c.scope AND d.owner = c.owner AND d.document_id ="
                " c.document_id WHERE c.tenant_id = ? AND c.scope = ? AND c.owner = ?"
                " AND c.status = 'active' AND d.status = 'active' ORDER BY c.key",
                _part(ref),
            )
            .fetchall()
        )
        return decode_rows(_stored, rows, lambda r: r[0])

    def doc_reindex(
        self, ref: ScopeRef, pin: EmbeddingPin, vectors: Sequence[tuple[int, Vector]]
    ) -> int:
        """Write each chunk's new vector and pin the corpus to ``pin`` in one transaction (a
        search never sees two models' vectors in one corpus); the generation moves. The
        active documents name the new model. Returns the vectors written."""
        with self._tx() as c:
            c.executemany(
                f"UPDATE doc_chunks SET vector = ? WHERE {_PART} AND key = ?",
                [(np.asarray(v, np.float32).tobytes(), *_part(ref), key) for key, v in vectors],
            )
            c.execute(
                "UPDATE doc_corpora SET model_id = ?, dimension = ?, generation = generation + 1"
                f" WHERE {_PART}",
                (pin.model_id, pin.dimension, *_part(ref)),
            )
            c.execute(
                f"UPDATE documents SET embedding_model = ? WHERE {_PART} AND status = 'active'",
                (pin.model_id, *_part(ref)),
            )
        return len(vectors)


def _part(ref: ScopeRef) -> tuple[str, str, str]:
    return ref.tenant_id, ref.scope.value, ref.owner


def _pin(c: sqlite3.Connection, ref: ScopeRef, pin: EmbeddingPin) -> None:
    """Pin the corpus to ``pin`` on its first document, else check it and move its generation
    (Conflict ``corpus_model_mismatch``: re-index it with `quipu reindex --corpus`)."""
    row = c.execute(
        f"SELECT model_id, dimension FROM doc_corpora WHERE {_PART}", _part(ref)
    ).fetchone()
    if row is None:
        c.execute(
            "INSERT INTO doc_corpora (tenant_id, scope, owner, model_id, dimension, generation)"
            " VALUES (?, ?, ?, ?, ?, 1)",
            (*_part(ref), pin.model_id, pin.dimension),
        )
        return
    check_corpus((str(row[0]), int(row[1])), (pin.model_id, pin.dimension))
    c.execute(f"UPDATE doc_corpora SET generation = generation + 1 WHERE {_PART}", _part(ref))


def _doc_params(d: Document) -> tuple[object, ...]:
    return (
        d.tenant_id,
        d.scope.value,
        d.owner,
        d.id,
        d.title,
        d.media_type.value,
        json.dumps(d.metadata, ensure_ascii=False),
        d.chars,
        d.chunks,
        d.status.value,
        d.version,
        d.actor,
        d.surface,
        d.agent_id,
        d.reason,
        to_micros(d.recorded_at),
        d.embedding_model,
        json.dumps(d.withheld, ensure_ascii=False),
    )


def _document(r: sqlite3.Row) -> Document:
    return Document(
        id=r["document_id"],
        tenant_id=r["tenant_id"],
        scope=Scope(r["scope"]),
        owner=r["owner"],
        title=r["title"],
        media_type=MediaType(r["media_type"]),
        metadata=loads(r["metadata"]),
        chars=int(r["chars"]),
        chunks=int(r["chunks"]),
        status=DocumentStatus(r["status"]),
        version=int(r["version"]),
        actor=r["actor"],
        surface=r["surface"],
        agent_id=r["agent_id"],
        reason=r["reason"],
        recorded_at=from_micros(int(r["recorded_at"])),
        embedding_model=r["embedding_model"],
        withheld=loads(r["withheld"]),
    )


def _stored(r: sqlite3.Row) -> StoredChunk:
    blob = r[8]
    return StoredChunk(
        key=int(r[0]),
        document_id=r[1],
        chunk=Chunk(
            seq=int(r[2]),
            start=int(r[3]),
            end=int(r[4]),
            text=r[5],
            status=ChunkStatus(r[6]),
            reason=r[7],
        ),
        vector=None if blob is None else np.frombuffer(blob, dtype=np.float32),
    )
