-- The entity graph (issue 26, GRAPH-1). Entities live in a scope partition like memories;
-- facts link a subject entity to an object entity or a literal value, with bi-temporal times
-- and the memory version they were read from. A fact row is never edited except once, when a
-- contradicting fact of a single-valued predicate closes it (invalid_at, expired_at,
-- invalidated_by). Mentions link entities to the memories that named them (graph recall and
-- erase read them). graph_ontology holds a tenant's own entity types and single-valued
-- predicates. tenant_id leads every key (Citus-compatible, like the PostgreSQL tables).

CREATE TABLE graph_entities (
    tenant_id   TEXT NOT NULL,
    scope       TEXT NOT NULL,
    owner       TEXT NOT NULL,
    entity_id   TEXT NOT NULL,
    name        TEXT NOT NULL,
    folded      TEXT NOT NULL,
    head        TEXT NOT NULL,
    type        TEXT NOT NULL,
    aliases     TEXT NOT NULL,             -- JSON list of names
    first_seen  INTEGER NOT NULL,
    last_seen   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner, entity_id)
);

CREATE INDEX graph_entities_folded ON graph_entities (tenant_id, scope, owner, folded);
CREATE INDEX graph_entities_head ON graph_entities (tenant_id, scope, owner, head);

CREATE TABLE graph_aliases (
    tenant_id   TEXT NOT NULL,
    scope       TEXT NOT NULL,
    owner       TEXT NOT NULL,
    folded      TEXT NOT NULL,
    entity_id   TEXT NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner, folded, entity_id)
);

CREATE TABLE graph_facts (
    tenant_id      TEXT NOT NULL,
    scope          TEXT NOT NULL,
    owner          TEXT NOT NULL,
    fact_id        TEXT NOT NULL,
    subject_id     TEXT NOT NULL,
    predicate      TEXT NOT NULL,
    object_id      TEXT,
    value          TEXT,
    valid_at       INTEGER NOT NULL,
    invalid_at     INTEGER,
    observed_at    INTEGER,
    recorded_at    INTEGER NOT NULL,
    expired_at     INTEGER,
    memory_id      TEXT NOT NULL,
    memory_version INTEGER NOT NULL,
    extractor      TEXT NOT NULL,
    surface        TEXT NOT NULL,
    key_id         TEXT,
    invalidated_by TEXT,
    invalidates    TEXT,
    PRIMARY KEY (tenant_id, scope, owner, fact_id)
);

CREATE INDEX graph_facts_subject ON graph_facts (tenant_id, scope, owner, subject_id, predicate);
CREATE INDEX graph_facts_object ON graph_facts (tenant_id, scope, owner, object_id);
CREATE INDEX graph_facts_memory ON graph_facts (tenant_id, memory_id);

CREATE TABLE graph_mentions (
    tenant_id      TEXT NOT NULL,
    scope          TEXT NOT NULL,
    owner          TEXT NOT NULL,
    entity_id      TEXT NOT NULL,
    memory_id      TEXT NOT NULL,
    memory_version INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner, entity_id, memory_id)
);

CREATE INDEX graph_mentions_memory ON graph_mentions (tenant_id, memory_id);

CREATE TABLE graph_ontology (
    tenant_id   TEXT NOT NULL,
    kind        TEXT NOT NULL,             -- type or predicate
    name        TEXT NOT NULL,
    declared_by TEXT,
    declared_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, kind, name)
);
