"""Named answers of the key/value, documents, search and knowledge routes in the OpenAPI
document (API-2). They are open models: each names its answer and says what it holds; the
fields are those of the use case's ``to_dict`` (docs/planes.md, docs/http-api.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class KVEntryOut(_Open):
    """One version of a key: key, version, value (JSON as set), status, times, actor."""


class KVPageOut(_Open):
    """Keys holding a value, by prefix, in byte order: ``items`` and ``next_cursor``."""


class KVHistoryOut(_Open):
    """Every version of a key, oldest first: ``items``."""


class KVEraseOut(_Open):
    """What a compliance erase of a key wiped."""


class DocumentAddOut(_Open):
    """The stored ``document``, its chunk count and the chunks refused or quarantined."""


class DocumentOut(_Open):
    """A document's record (no body)."""


class DocumentPageOut(_Open):
    """Active documents of one scope: ``items`` and ``next_cursor``."""


class PointersOut(_Open):
    """Ranked pointers (``results``: document, chunk, offsets, marked snippet, score) and
    ``meta``; never a whole body."""


class DocumentTextOut(_Open):
    """A bounded range of a document's text with its offsets; withheld spans named."""


class DocumentEraseOut(_Open):
    """What a compliance erase of a document removed."""


class PlaneSearchOut(_Open):
    """Rows of every plane of one scope, each labelled with its ``plane``, and ``meta``."""


class ArticleWriteOut(_Open):
    """The article written and the novelty gate's verdict (created, gated_to_draft,
    deduplicated, updated)."""


class ArticleOut(_Open):
    """One knowledge article version."""


class ArticleHistoryOut(_Open):
    """Every version of an article, oldest first."""


class ArticleSearchOut(_Open):
    """Article rows ``{id, title, category, tags, score, snippet}`` and ``meta``."""


class ArticleEraseOut(_Open):
    """What erasing an article wiped."""


class ContextOut(_Open):
    """Merged recall: labelled rows, ``recall_id``, the selection ledger, the budget, diversity
    counts, ``answer_confidence``, ``degraded`` and the rendered block."""


class ReferencedOut(_Open):
    """How many referenced ids were accepted and how many pairs were new."""


class GraduateOut(_Open):
    """The article a memory graduated into and the gate's verdict."""


class DocumentJobOut(_Open):
    """A large document's ingest job: ``status``, chunks ``embedded`` of ``total``, result."""


class GraphAnswerOut(_Open):
    """The entity graph's answer (GRAPH-1): ``entities`` (each with what ``matched`` it),
    ``facts`` (subject, predicate, object or value, times, source ``memory_ids``),
    ``memory_ids`` and ``meta``."""


class GraphOntologyOut(_Open):
    """The tenant's entity ``types`` and ``single_valued`` predicates (built-ins and its own)."""


class ArticlePageOut(_Open):
    """A page of article summaries (no bodies), by id: ``items`` and ``next_cursor``."""


class GraphMergeOut(_Open):
    """An entity merge (GRAPH-1): the kept ``entity`` as it is now, its new ``version`` and the
    merge record (``merge_id``, ``kept_id``, ``merged_id``, ``merged_name``, ``merged_at``,
    ``merged_by``, ``reason``, ``reverted_at``, ``kept_version``)."""


class GraphRevertOut(_Open):
    """A reverted merge: ``merge_id``, the kept ``entity`` now and the ``restored`` entity."""


class GraphEntityHistoryOut(_Open):
    """An entity's old versions, oldest first: ``entity_id`` and ``versions``."""


class ArticleCandidatePageOut(_Open):
    """Model-written article bodies (GRAD-1), by id: ``items`` (id, article_id,
    article_version, memory_id, owner, actor, body, model, status, proposed_at, truncated,
    injection_suspected, judged_by, judged_at, reason) and ``next_cursor``."""


class ArticleCandidateJudgedOut(_Open):
    """A judged candidate: ``candidate``, and when affirmed the article write's ``verdict``
    and the ``article`` (summary of its new version)."""
