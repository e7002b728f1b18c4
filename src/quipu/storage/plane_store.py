"""The planes' half of the store protocol: key/value, documents, knowledge, the console's
session reads, the planes' export and re-index, the compiled memory index and the entity graph.
:class:`quipu.storage.base.Store` extends it, so each backend still implements one protocol."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from quipu.core.auth import AuditEvent
from quipu.core.documents import Chunk, Document, StoredChunk
from quipu.core.graph import ChunkMirror, Entity, Extraction, Fact, Ontology
from quipu.core.graph import Source as GraphSource
from quipu.core.graph_links import GraphLinks
from quipu.core.jobs import Job
from quipu.core.knowledge import (
    ArticleCandidate,
    ArticleVersion,
    CandidateStatus,
    MemoryUsage,
    RecallLedger,
    UsageEvent,
)
from quipu.core.kv import KVChange, KVEntry
from quipu.core.memory_index import MemoryIndex
from quipu.core.placement import Policy
from quipu.core.portable import PortableDocument
from quipu.core.records import MemoryVersion, Scope, ScopeRef
from quipu.core.scope_lease import ScopeLease
from quipu.core.sessions import (
    SessionInfo,
)
from quipu.retrieval.vectors import Vector
from quipu.storage.graph_merge import MergeRecord
from quipu.storage.graph_rows import GraphWrite


@dataclass(frozen=True)
class EmbeddingPin:
    """The embedding model a store's vectors were made with; fixed at first write."""

    model_id: str
    dimension: int


class PlaneStore(Protocol):
    """What a store keeps for the planes beside memories (one protocol with Store)."""

    # -- key/value plane (KV-1) ----------------------------------------------------------------
    def kv_write(
        self,
        ref: ScopeRef,
        change: KVChange,
        expected_version: int | None,
        now: datetime,
        quota: int,
    ) -> KVEntry:
        """Append the next version of ``change.key`` in ``ref`` (a value, or a delete) and end
        the current one, with its audit line, in one serialised transaction. The
        compare-and-set is :func:`quipu.core.kv.check_write` (409 ``version_conflict``, 404 to
        delete a key holding no value, 409 ``erased``); LimitExceeded ``quota_exceeded`` when
        a new key would pass ``quota`` keys holding values in ``ref``."""

    def kv_get(self, ref: ScopeRef, key: str, as_of: datetime | None) -> KVEntry | None:
        """The current version of ``key`` (a delete's version included), or the one in force
        at ``as_of``; None when there is none."""

    def kv_history(self, ref: ScopeRef, key: str) -> list[KVEntry]:
        """Every version of ``key``, oldest first."""

    def kv_list(
        self, ref: ScopeRef, prefix: str, after: str | None, limit: int, as_of: datetime | None
    ) -> list[KVEntry]:
        """Up to ``limit`` keys starting with ``prefix`` and after ``after`` that hold a value
        (now, or at ``as_of``), in byte order of the key."""

    def kv_erase(self, ref: ScopeRef, key: str, audit: AuditEvent) -> int:
        """Wipe the value and reason of every version of ``key``, mark them erased and write
        ``audit``, in one transaction; the number of versions wiped (0: no such key)."""

    # -- documents plane (DOC-1) ---------------------------------------------------------------
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
        """Store ``document`` with its chunks (each with its vector, or None when not served)
        and ``audit`` in one transaction, pinning the scope's corpus to ``pin`` on its first
        document; Conflict ``corpus_model_mismatch`` (nothing written) when it is pinned to
        another model or dimension. ``graph``: the chunks' graph rows, written in the same
        transaction (GRAPH-1)."""

    def doc_delete(
        self, ref: ScopeRef, document_id: str, audit: AuditEvent, reason: str | None
    ) -> Document | None:
        """Mark an active document deleted (its version + 1; its chunks leave search) with
        ``audit``; None when there is no such active document."""

    def doc_erase(self, ref: ScopeRef, document_id: str, audit: AuditEvent) -> int:
        """Compliance erase of a document not yet erased: its chunks deleted (text and
        vectors), its title, metadata and reasons wiped (audit lines about it included), status
        ``erased``, with ``audit``, in one transaction. The chunks removed; 0 when there is no
        such document."""

    def doc_get(self, ref: ScopeRef, document_id: str) -> Document | None: ...

    def doc_list(self, ref: ScopeRef, after: str | None, limit: int) -> list[Document]:
        """Active documents of the scope, by id, after ``after``."""

    def doc_corpus(self, ref: ScopeRef) -> tuple[EmbeddingPin, int] | None:
        """The corpus's pinned model and its generation (which moves with each change)."""

    def doc_served(self, ref: ScopeRef) -> list[StoredChunk]:
        """Every chunk search may serve (active, of an active document), with its vector."""

    def doc_chunks(
        self, ref: ScopeRef, document_id: str, start: int = 0, end: int = 2**62
    ) -> list[StoredChunk]:
        """The chunks of one document overlapping ``[start, end)``, by ``seq``, no vectors."""

    # -- the knowledge plane (KNOW-1, RECALL-6, RECALL-9, GRAD-1) ----------------------------
    def knowledge_put(self, article: ArticleVersion, vector: Vector | None) -> None:
        """Write ``article`` as the article's new current version: Conflict
        ``version_conflict`` unless the current version is ``article.version - 1`` (0: new),
        Conflict ``title_taken`` when another live article of the tenant has its folded
        title."""

    def knowledge_get(
        self, tenant_id: str, article_id: str, as_of: datetime | None = None
    ) -> ArticleVersion | None:
        """The current version, or the last one recorded at or before ``as_of``."""

    def knowledge_history(self, tenant_id: str, article_id: str) -> list[ArticleVersion]: ...

    def knowledge_live(
        self, tenant_id: str
    ) -> tuple[int, list[tuple[ArticleVersion, Vector | None]]]:
        """The tenant's write generation and its live articles with their vectors, read
        together (one snapshot), ordered by id."""

    def knowledge_generation(self, tenant_id: str) -> int:
        """Bumped by every article write of the tenant (0: none yet)."""

    def knowledge_by_hash(self, tenant_id: str, text_hash: str) -> list[ArticleVersion]: ...

    def knowledge_erase(self, tombstone: ArticleVersion) -> bool:
        """Delete every version of the article and leave ``tombstone``; False when none."""

    def recall_put(self, ledger: RecallLedger) -> None: ...

    def recall_get(self, tenant_id: str, recall_id: str) -> RecallLedger | None: ...

    def recall_reference(
        self, tenant_id: str, recall_id: str, subject: str, ids: Sequence[str], at: datetime
    ) -> int:
        """Record distinct (recall, item) references; how many were new."""

    def recall_references(self, tenant_id: str, recall_id: str) -> list[str]: ...

    def usage_record(self, events: Sequence[UsageEvent]) -> None:
        """Append usage events (an event id already stored is left as it is)."""

    def usage_events(self, tenant_id: str, memory_id: str) -> list[UsageEvent]: ...

    def usage_bump(
        self, tenant_id: str, memory_ids: Sequence[str], at: datetime, cooldown: timedelta
    ) -> list[str]:
        """Add one recall to each memory not bumped within ``cooldown``; those bumped."""

    def memory_usage(self, tenant_id: str, memory_id: str) -> MemoryUsage | None: ...

    def hot_tenants(self, threshold: int, limit: int) -> list[str]:
        """Tenants with an ungraduated memory of ``threshold`` recalls or more."""

    def hot_memories(self, tenant_id: str, threshold: int, limit: int) -> list[str]: ...

    def mark_graduated(
        self, tenant_id: str, memory_id: str, article_id: str, at: datetime, re_scoped: bool
    ) -> bool:
        """Stamp the memory's one graduation; False when it had graduated already."""

    # -- what the operator console reads of sessions (OPS-4) ---------------------------------
    def list_sessions(
        self, tenant_id: str, agent: str | None, user: str | None, limit: int
    ) -> list[SessionInfo]:
        """The tenant's sessions whose subject has agent part ``agent`` and user part ``user``
        (``None``: any), the most recently written first (sessions whose turns are all
        pruned last)."""

    def session_jobs(
        self, tenant_id: str, kind: str, idempotency_key: str, limit: int
    ) -> list[Job]:
        """The tenant's jobs of ``kind`` under ``idempotency_key``, newest first."""

    def session_memories(
        self, refs: Sequence[ScopeRef], session_id: str, limit: int
    ) -> list[MemoryVersion]:
        """The current versions (any status) of memories written in session ``session_id``
        in the partitions ``refs``, in write order."""

    def knowledge_by_memory(
        self, tenant_id: str, memory_ids: Sequence[str]
    ) -> list[ArticleVersion]:
        """The current version of each article not yet erased that was derived (graduated)
        from one of ``memory_ids``, by id: what an erase of those memories must reach."""

    def usage_erase(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, int]:
        """Delete the usage rows (events, counter and graduation stamp) of ``memory_ids``;
        rows deleted per table."""

    def kv_subject_keys(
        self, tenant_id: str, user_id: str, limit: int
    ) -> list[tuple[ScopeRef, str]]:
        """Up to ``limit`` keys (with their partition) not yet erased in ``user_id``'s
        ``user`` and ``agent_user`` partitions: a subject erasure's next batch."""

    def doc_subject_ids(
        self, tenant_id: str, user_id: str, limit: int
    ) -> list[tuple[ScopeRef, str]]:
        """Up to ``limit`` documents (with their partition) not yet erased in ``user_id``'s
        ``user`` and ``agent_user`` partitions: a subject erasure's next batch."""

    # -- export and import of the key/value and documents planes (OPS-2, issue 28) -----------
    def export_kv(self, tenant_id: str | None) -> Iterator[KVEntry]:
        """Every version of every key (of one tenant, or all), erased ones wiped."""

    def import_kv(self, entries: Iterable[KVEntry]) -> int:
        """Insert exported versions verbatim, skipping any present; how many were added."""

    def export_documents(self, tenant_id: str | None) -> Iterator[PortableDocument]:
        """Every document (of one tenant, or all) with its chunks, vectors and corpus pin."""

    def import_documents(self, documents: Iterable[PortableDocument]) -> int:
        """Insert exported documents verbatim unless their id is present; an unpinned corpus
        takes the export's pin, one pinned to another model gets the chunks without vectors.
        Returns how many documents were added."""

    # -- re-indexing the documents plane (`quipu reindex --corpus`, issue 28) -----------------
    def doc_corpora(self, tenant_id: str | None) -> list[tuple[ScopeRef, EmbeddingPin]]:
        """Every corpus (of one tenant, or all) with its pinned model, in order."""

    def doc_servable(self, ref: ScopeRef) -> list[StoredChunk]:
        """Every active chunk of an active document, with its vector or ``None``."""

    def doc_reindex(
        self, ref: ScopeRef, pin: EmbeddingPin, vectors: Sequence[tuple[int, Vector]]
    ) -> int:
        """Write the chunks' new vectors (by storage key) and pin the corpus to ``pin``, in one
        transaction; the corpus's generation moves. Returns the vectors written."""

    # -- the compiled memory index (issue 24, CONSOL-1, CONSOL-2, CONSOL-5) -------------------
    def index_put(self, index: MemoryIndex) -> MemoryIndex:
        """Store the next version of a scope's index in one transaction with
        :func:`quipu.core.memory_index.check_next` (409 ``version_conflict`` when another
        rewrite won, 409 ``index_entry_dropped`` when it drops an active entry)."""

    def index_get(self, ref: ScopeRef, version: int | None) -> MemoryIndex | None:
        """The scope's current index (``version`` None) or that version of it."""

    def index_history(self, ref: ScopeRef, before: int | None, limit: int) -> list[MemoryIndex]:
        """Versions of the scope's index below ``before``, newest first."""

    def index_changed_scopes(
        self, tenant_id: str, after: datetime | None, until: datetime, limit: int
    ) -> list[tuple[ScopeRef, datetime]]:
        """The tenant's scopes with a memory version recorded in (after, until], each with
        its newest such time, oldest first."""

    def index_due(self, tenant_id: str, built_before: datetime, limit: int) -> list[ScopeRef]:
        """The tenant's scopes whose current index was built before ``built_before``."""

    def index_sweep_mark(self, tenant_id: str) -> datetime | None: ...

    def index_set_sweep_mark(self, tenant_id: str, at: datetime) -> None:
        """Move the tenant's consolidation sweep mark forward (never back)."""

    def index_last_recalled(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, datetime]:
        """When each memory was last in a recall's hits (its newest usage event)."""

    def index_redact(self, tenant_id: str, memory_ids: Sequence[str]) -> int:
        """Replace the text of these memories in every kept index version of the tenant with
        ``(erased)`` (LIFE-4); how many versions changed."""

    def consolidation_lease(
        self, ref: ScopeRef, holder: str, now: datetime, until: datetime, cooldown: timedelta
    ) -> ScopeLease:
        """Take the scope's consolidation lease until ``until`` (issue 24, CONSOL-4): refused
        while another holder's lease runs, or within ``cooldown`` of the last release
        (:func:`quipu.core.scope_lease.decide`); one serialised step across processes."""

    def consolidation_release(self, ref: ScopeRef, token: int, now: datetime) -> bool:
        """Release the lease granted with ``token`` and start the cooldown; False when the
        lease was taken over meanwhile (it expired)."""

    # -- entity graph (GRAPH-1) ----------------------------------------------------------------
    def graph_write(
        self,
        ref: ScopeRef,
        extraction: Extraction,
        source: GraphSource,
        now: datetime,
        ontology: Ontology | None = None,
        *,
        fill: bool = False,
    ) -> GraphWrite | None:
        """Resolve the extraction's mentions to the scope's entities (creating the new ones),
        record each as a mention of ``source``'s memory and append its facts, closing the open
        facts of single-valued predicates they contradict; one serialised transaction.
        ``ontology`` None: the built-ins and the tenant's declared ones, read in that
        transaction. ``fill``: write nothing when the memory already has graph rows (a
        backfill). None: nothing written."""

    def graph_lookup(
        self, ref: ScopeRef, folded: Sequence[str], heads: Sequence[str]
    ) -> list[Entity]:
        """Entities of the scope whose folded name or alias is in ``folded`` or whose head is
        in ``heads`` (resolution candidates; at most 500)."""

    def graph_entities(self, ref: ScopeRef, entity_ids: Sequence[str]) -> list[Entity]: ...

    def graph_facts(self, ref: ScopeRef, entity_ids: Sequence[str], limit: int) -> list[Fact]:
        """Up to ``limit`` facts with a subject or object in ``entity_ids``, newest recorded
        first, open and closed, whose source memory's current version is active."""

    def graph_mentions(
        self, ref: ScopeRef, entity_ids: Sequence[str], limit: int
    ) -> list[tuple[str, str]]:
        """(entity id, memory id) of active memories naming any of ``entity_ids``."""

    def graph_forget(self, tenant_id: str, memory_ids: Sequence[str]) -> int:
        """Delete the facts and mentions read from ``memory_ids`` (erase), and the entities no
        memory names any more; the number of facts deleted."""

    def graph_ontology(self, tenant_id: str) -> tuple[set[str], set[str]]:
        """The tenant's declared (entity types, single-valued predicates)."""

    def graph_declare(
        self, tenant_id: str, kind: str, name: str, by: str | None, now: datetime
    ) -> None:
        """Declare an entity type (``kind`` "type") or a single-valued predicate
        (``kind`` "predicate") for the tenant; declaring again changes nothing."""

    # -- placement by ontology (GRAPH-2) --------------------------------------------------------
    def transaction(self, tenant_id: str | None = None) -> AbstractContextManager[None]:
        """A block in which every write this thread makes through the store (``insert``,
        ``graph_write``, ``record_audit``, ...) commits together, or none does."""

    def placement_policy(self, tenant_id: str, version: int | None = None) -> Policy | None:
        """The tenant's placement policy: its newest version, or ``version``; None if none."""

    def placement_declare(self, tenant_id: str, policy: Policy, expected: int | None) -> Policy:
        """Append ``policy`` as the tenant's next version (409 ``version_conflict`` when
        ``expected`` is not the current version); the stored version."""

    def placement_mark(
        self, tenant_id: str, memory_id: str, origin: Scope, policy_version: int, at: datetime
    ) -> None:
        """Record that placement moved ``memory_id`` to the tenant scope from ``origin`` (the
        scope its writer wrote to), in the caller's transaction (GRAPH-2)."""

    def placement_origin(self, tenant_id: str, memory_id: str) -> Scope | None:
        """The scope a placed memory's writer wrote to; None: the memory was not placed."""

    # -- entity graph, operator reads (GRAPH-1, OPS-4: the console) ----------------------------
    def graph_entity_list(
        self,
        ref: ScopeRef,
        *,
        types: Sequence[str],
        prefix: str | None,
        before: tuple[datetime, str] | None,
        limit: int,
        count_cap: int,
    ) -> list[tuple[Entity, int]]:
        """Up to ``limit`` entities of the scope that an active memory names, the most recently
        seen first (then by id), each with its current facts (open, from an active memory,
        as subject or object; counted up to ``count_cap`` each way); only ``types`` when
        given, only folded names starting with the folded ``prefix``, only after ``before``
        (the last row's (last_seen, entity_id) of the previous page)."""

    def graph_memory_rows(
        self, ref: ScopeRef, memory_id: str, limit: int
    ) -> tuple[list[Entity], list[Fact]]:
        """What one memory (of the scope ``ref``) put in the graph: the entities it names and
        the facts read from it, open and closed, in whatever status the memory now is (at
        most ``limit`` of each)."""

    def graph_open_facts(self, ref: ScopeRef, entity_id: str, limit: int) -> list[Fact]:
        """Up to ``limit`` open facts (no ``invalid_at``) with ``entity_id`` as subject or
        object whose source memory is active, newest recorded first: an entity's current
        facts without reading the closed ones."""

    def graph_merge(
        self,
        ref: ScopeRef,
        kept_id: str,
        merged_id: str,
        merge_id: str,
        now: datetime,
        by: str | None,
        reason: str | None,
    ) -> tuple[Entity, MergeRecord]:
        """Merge entity ``merged_id`` into ``kept_id`` in one transaction: a new version of the
        kept entity (the old one kept), the merged one's facts and mentions re-pointed, its row
        gone, the merge recorded (:mod:`quipu.storage.graph_merge`). NotFound, InvalidInput."""

    def graph_merge_revert(
        self, ref: ScopeRef, merge_id: str, now: datetime, by: str | None
    ) -> tuple[Entity, Entity]:
        """Undo a merge: (the kept entity now, the merged entity back). NotFound; Conflict
        ``merge_reverted`` or ``merge_conflict`` (a later merge of the kept entity)."""

    def graph_entity_history(self, ref: ScopeRef, entity_id: str) -> list[dict[str, Any]]:
        """The entity's old versions, oldest first."""

    def graph_links(
        self, ref: ScopeRef, keys: Sequence[int], names: Sequence[str], fanout: int
    ) -> GraphLinks:
        """Recall's multi-hop read (issue 26): the entities the memory rows ``keys`` name, the
        entities whose folded name or alias is in ``names``, how many memories name each, and
        the current active rows naming each entity that at most ``fanout`` memories name."""

    # -- what merged recall showed each session (RECALL-9 diversity, issue 25) ----------------
    def shown_add(
        self,
        tenant_id: str,
        subject: str,
        session_id: str,
        user_id: str | None,
        article_ids: Sequence[str],
        at: datetime,
    ) -> None:
        """Record that ``article_ids`` were shown to (tenant, subject, session) at ``at``
        (again: the time moves on); ``user_id`` is the end user the caller acted for."""

    def shown_get(
        self, tenant_id: str, subject: str, session_id: str, since: datetime, limit: int
    ) -> frozenset[str]:
        """The articles shown to (tenant, subject, session) after ``since``: the ``limit``
        most recent."""

    def shown_expire(self, before: datetime) -> int:
        """Delete shown rows recorded at or before ``before`` (a bounded number of tenants per
        call); how many went."""

    def shown_erase_subject(self, tenant_id: str, user_id: str) -> int:
        """Delete the shown rows of ``user_id`` (acted for, or the subject itself; LIFE-4)."""

    # -- model-written article bodies awaiting review (GRAD-1, LIFE-5, issue 25) -------------
    def candidate_put(self, candidate: ArticleCandidate) -> None: ...

    def candidate_get(self, tenant_id: str, candidate_id: str) -> ArticleCandidate | None: ...

    def candidate_list(
        self, tenant_id: str, status: CandidateStatus | None, after: str | None, limit: int
    ) -> list[ArticleCandidate]:
        """The tenant's candidates (of ``status``, any when None) with id after ``after``,
        by id."""

    def candidate_judge(
        self,
        tenant_id: str,
        candidate_id: str,
        status: CandidateStatus,
        judged_by: str,
        at: datetime,
        reason: str,
    ) -> bool:
        """Move a candidate still awaiting review to ``status``; False when it was not."""
