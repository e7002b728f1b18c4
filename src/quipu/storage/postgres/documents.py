"""The documents plane on PostgreSQL (a mixin of :class:`PostgresStore`; DOC-1).

A document's chunks, vectors, corpus pin and audit line are written in one transaction, under
the corpus row's lock (``SELECT ... FOR UPDATE`` after an upsert); the corpus row's
``generation`` moves with every add and delete, so an in-process search index knows when to
reload.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import psycopg

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
from quipu.storage.postgres.control import insert_audit
from quipu.storage.postgres.graph import graph_sql
from quipu.storage.postgres.kv import SUBJECT_SQL
from quipu.storage.subject import subject_rows

_DOC = (
    "tenant_id, scope, owner, document_id, title, media_type, metadata, chars, chunks, status,"
    " version, actor, surface, agent_id, reason, recorded_at, embedding_model, withheld"
)
_PART = "tenant_id = %s AND scope = %s AND owner = %s"


class DocumentTables:
    """Needs the store's ``_conn()`` and ``_tx()``."""

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
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
                f"INSERT INTO documents ({_DOC}) VALUES ({', '.join(['%s'] * 18)})",
                _doc_params(document),
            )
            c.cursor().executemany(
                "INSERT INTO doc_chunks (tenant_id, scope, owner, document_id, seq, start_at,"
                " end_at, text, status, reason, vector)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
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
            mirror_chunks(graph_sql(c, ref), ref, graph, document.recorded_at)  # GRAPH-1
            insert_audit(c, audit)
        return document

    def doc_delete(
        self, ref: ScopeRef, document_id: str, audit: AuditEvent, reason: str | None
    ) -> Document | None:
        admit(audit)
        with self._tx() as c:
            row = c.execute(
                f"SELECT {_DOC} FROM documents WHERE {_PART} AND document_id = %s"
                " AND status = 'active'",
                (*_part(ref), document_id),
            ).fetchone()
            if row is None:
                return None
            c.execute(
                "UPDATE documents SET status = 'deleted', version = version + 1, reason = %s"
                f" WHERE {_PART} AND document_id = %s",
                (reason, *_part(ref), document_id),
            )
            c.execute(
                f"UPDATE doc_chunks SET vector = NULL WHERE {_PART} AND document_id = %s",
                (*_part(ref), document_id),
            )
            c.execute(
                f"UPDATE doc_corpora SET generation = generation + 1 WHERE {_PART}", _part(ref)
            )
            insert_audit(c, audit)
            found = c.execute(
                f"SELECT {_DOC} FROM documents WHERE {_PART} AND document_id = %s",
                (*_part(ref), document_id),
            ).fetchall()
        docs = decode_rows(_document, found, lambda r: r[3])
        return docs[0] if docs else None

    def doc_erase(self, ref: ScopeRef, document_id: str, audit: AuditEvent) -> int:
        admit(audit)
        with self._tx() as c:
            found = c.execute(
                f"SELECT chunks FROM documents WHERE {_PART} AND document_id = %s"
                " AND status != 'erased'",
                (*_part(ref), document_id),
            ).fetchone()
            if found is None:
                return 0
            gone = c.execute(
                f"DELETE FROM doc_chunks WHERE {_PART} AND document_id = %s",
                (*_part(ref), document_id),
            ).rowcount
            c.execute(
                "UPDATE documents SET title = '', metadata = '{}', withheld = '[]', reason = NULL,"
                f" status = 'erased', version = version + 1 WHERE {_PART} AND document_id = %s",
                (*_part(ref), document_id),
            )
            c.execute(
                "UPDATE audit_log SET reason = NULL WHERE tenant_id = %s"
                " AND action IN ('document.add', 'document.delete') AND target_ids = %s",
                (ref.tenant_id, [document_id]),
            )
            c.execute(
                f"UPDATE doc_corpora SET generation = generation + 1 WHERE {_PART}", _part(ref)
            )
            insert_audit(c, audit)
            return int(gone)

    def doc_get(self, ref: ScopeRef, document_id: str) -> Document | None:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_DOC} FROM documents WHERE {_PART} AND document_id = %s",
                (*_part(ref), document_id),
            ).fetchall()
        docs = decode_rows(_document, rows, lambda r: r[3])
        return docs[0] if docs else None

    def doc_list(self, ref: ScopeRef, after: str | None, limit: int) -> list[Document]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_DOC} FROM documents WHERE {_PART} AND status = 'active'"
                " AND document_id > %s ORDER BY document_id LIMIT %s",
                (*_part(ref), after or "", limit),
            ).fetchall()
        return decode_rows(_document, rows, lambda r: r[3])

    def doc_corpus(self, ref: ScopeRef) -> tuple[EmbeddingPin, int] | None:
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT model_id, dimension, generation FROM doc_corpora WHERE {_PART}",
                _part(ref),
            ).fetchone()
        if row is None:
            return None
        return EmbeddingPin(str(row[0]), int(row[1])), int(row[2])

    def doc_served(self, ref: ScopeRef) -> list[StoredChunk]:
        """Every served chunk (active, of an active document) of the corpus, with its vector."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT c.key, c.document_id, c.seq, c.start_at, c.end_at, c.text, c.status,"
                " c.reason, c.vector FROM doc_chunks c JOIN documents d ON d.tenant_id ="
                " c.tenant_id AND d.scope = c.scope AND d.owner = c.owner AND d.document_id ="
                " c.document_id WHERE c.tenant_id = %s AND c.scope = %s AND c.owner = %s"
                " AND c.status = 'active' AND d.status = 'active' AND c.vector IS NOT NULL"
                " ORDER BY c.key",
                _part(ref),
            ).fetchall()
        return decode_rows(_stored, rows, lambda r: r[0])

    def doc_chunks(
        self, ref: ScopeRef, document_id: str, start: int = 0, end: int = 2**62
    ) -> list[StoredChunk]:
        """The chunks of one document overlapping ``[start, end)``, in order, without vectors."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT key, document_id, seq, start_at, end_at, text, status, reason, NULL"
                f" FROM doc_chunks WHERE {_PART} AND document_id = %s AND end_at > %s"
                " AND start_at < %s ORDER BY seq",
                (*_part(ref), document_id, start, end),
            ).fetchall()
        return decode_rows(_stored, rows, lambda r: r[0])

    def doc_subject_ids(
        self, tenant_id: str, user_id: str, limit: int
    ) -> list[tuple[ScopeRef, str]]:
        """Up to ``limit`` documents not yet erased in ``user_id``'s ``user`` and
        ``agent_user`` partitions (a subject erasure's next batch)."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT scope, owner, document_id FROM documents WHERE tenant_id = %s"
                f" AND status <> 'erased' AND ({SUBJECT_SQL}) ORDER BY scope, owner,"
                " document_id LIMIT %s",
                (tenant_id, user_id, user_id, limit),
            ).fetchall()
        return subject_rows(tenant_id, user_id, rows)

    # -- re-indexing a corpus (`quipu reindex --corpus`) ----------------------------------------
    def doc_corpora(self, tenant_id: str | None) -> list[tuple[ScopeRef, EmbeddingPin]]:
        """Every corpus (of one tenant, or all) with its pinned model."""
        where, args = ("", ()) if tenant_id is None else (" WHERE tenant_id = %s", (tenant_id,))
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT tenant_id, scope, owner, model_id, dimension FROM doc_corpora"
                f"{where} ORDER BY tenant_id, scope, owner",
                args,
            ).fetchall()
        return [
            (ScopeRef(r[0], Scope(r[1]), r[2]), EmbeddingPin(str(r[3]), int(r[4]))) for r in rows
        ]

    def doc_servable(self, ref: ScopeRef) -> list[StoredChunk]:
        """Every chunk search would serve once embedded (active, of an active document), with
        its vector or ``None``."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT c.key, c.document_id, c.seq, c.start_at, c.end_at, c.text, c.status,"
                " c.reason, c.vector FROM doc_chunks c JOIN documents d ON d.tenant_id ="
                " c.tenant_id AND d.scope = c.scope AND d.owner = c.owner AND d.document_id ="
                " c.document_id WHERE c.tenant_id = %s AND c.scope = %s AND c.owner = %s"
                " AND c.status = 'active' AND d.status = 'active' ORDER BY c.key",
                _part(ref),
            ).fetchall()
        return decode_rows(_stored, rows, lambda r: r[0])

    def doc_reindex(
        self, ref: ScopeRef, pin: EmbeddingPin, vectors: Sequence[tuple[int, Vector]]
    ) -> int:
        """Write each chunk's new vector and pin the corpus to ``pin`` in one transaction, under
        the corpus row's lock; the generation moves. The active documents name the new model."""
        with self._tx() as c:
            c.execute(f"SELECT 1 FROM doc_corpora WHERE {_PART} FOR UPDATE", _part(ref))
            c.cursor().executemany(
                f"UPDATE doc_chunks SET vector = %s WHERE {_PART} AND key = %s",
                [(np.asarray(v, np.float32).tobytes(), *_part(ref), key) for key, v in vectors],
            )
            c.execute(
                "UPDATE doc_corpora SET model_id = %s, dimension = %s,"
                f" generation = generation + 1 WHERE {_PART}",
                (pin.model_id, pin.dimension, *_part(ref)),
            )
            c.execute(
                f"UPDATE documents SET embedding_model = %s WHERE {_PART} AND status = 'active'",
                (pin.model_id, *_part(ref)),
            )
        return len(vectors)


def _part(ref: ScopeRef) -> tuple[str, str, str]:
    return ref.tenant_id, ref.scope.value, ref.owner


def _pin(c: psycopg.Connection[Any], ref: ScopeRef, pin: EmbeddingPin) -> None:
    """Pin the corpus to ``pin`` on its first document, else check it; the row's lock
    serialises the corpus's writers, and its generation moves (Conflict
    ``corpus_model_mismatch``)."""
    c.execute(
        "INSERT INTO doc_corpora (tenant_id, scope, owner, model_id, dimension, generation)"
        " VALUES (%s, %s, %s, %s, %s, 0) ON CONFLICT DO NOTHING",
        (*_part(ref), pin.model_id, pin.dimension),
    )
    row = c.execute(
        f"SELECT model_id, dimension FROM doc_corpora WHERE {_PART} FOR UPDATE", _part(ref)
    ).fetchone()
    assert row is not None
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
        d.recorded_at,
        d.embedding_model,
        json.dumps(d.withheld, ensure_ascii=False),
    )


def _document(r: Any) -> Document:
    return Document(
        id=r[3],
        tenant_id=r[0],
        scope=Scope(r[1]),
        owner=r[2],
        title=r[4],
        media_type=MediaType(r[5]),
        metadata=loads(r[6]),
        chars=int(r[7]),
        chunks=int(r[8]),
        status=DocumentStatus(r[9]),
        version=int(r[10]),
        actor=r[11],
        surface=r[12],
        agent_id=r[13],
        reason=r[14],
        recorded_at=r[15],
        embedding_model=r[16],
        withheld=loads(r[17]),
    )


def _stored(r: Any) -> StoredChunk:
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
