-- The entity graph (issue 26, GRAPH-1). Entities live in a scope partition like memories;
-- facts link a subject entity to an object entity or a literal value, with bi-temporal times
-- and the memory version they were read from. A fact row is never edited except once, when a
-- contradicting fact of a single-valued predicate closes it (invalid_at, expired_at,
-- invalidated_by). Mentions link entities to the memories that named them (graph recall and
-- erase read them). graph_ontology holds a tenant's own entity types and single-valued
-- predicates. tenant_id leads every key; under Citus the tables are distributed by tenant_id, colocated with
-- memory_versions (migrate.DISTRIBUTED).

CREATE TABLE graph_entities (
    tenant_id   text NOT NULL,
    scope       text NOT NULL,
    owner       text NOT NULL,
    entity_id   text NOT NULL,
    name        text NOT NULL,
    folded      text NOT NULL,
    head        text NOT NULL,
    type        text NOT NULL,
    aliases     text NOT NULL,             -- JSON list of names
    first_seen  timestamptz NOT NULL,
    last_seen   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner, entity_id)
);

CREATE INDEX graph_entities_folded ON graph_entities (tenant_id, scope, owner, folded);
CREATE INDEX graph_entities_head ON graph_entities (tenant_id, scope, owner, head);

CREATE TABLE graph_aliases (
    tenant_id   text NOT NULL,
    scope       text NOT NULL,
    owner       text NOT NULL,
    folded      text NOT NULL,
    entity_id   text NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner, folded, entity_id)
);

CREATE TABLE graph_facts (
    tenant_id      text NOT NULL,
    scope          text NOT NULL,
    owner          text NOT NULL,
    fact_id        text NOT NULL,
    subject_id     text NOT NULL,
    predicate      text NOT NULL,
    object_id      text,
    value          text,
    valid_at       timestamptz NOT NULL,
    invalid_at     timestamptz,
    observed_at    timestamptz,
    recorded_at    timestamptz NOT NULL,
    expired_at     timestamptz,
    memory_id      text NOT NULL,
    memory_version integer NOT NULL,
    extractor      text NOT NULL,
    surface        text NOT NULL,
    key_id         text,
    invalidated_by text,
    invalidates    text,
    PRIMARY KEY (tenant_id, scope, owner, fact_id)
);

CREATE INDEX graph_facts_subject ON graph_facts (tenant_id, scope, owner, subject_id, predicate);
CREATE INDEX graph_facts_object ON graph_facts (tenant_id, scope, owner, object_id);
CREATE INDEX graph_facts_memory ON graph_facts (tenant_id, memory_id);

CREATE TABLE graph_mentions (
    tenant_id      text NOT NULL,
    scope          text NOT NULL,
    owner          text NOT NULL,
    entity_id      text NOT NULL,
    memory_id      text NOT NULL,
    memory_version integer NOT NULL,
    PRIMARY KEY (tenant_id, scope, owner, entity_id, memory_id)
);

CREATE INDEX graph_mentions_memory ON graph_mentions (tenant_id, memory_id);

CREATE TABLE graph_ontology (
    tenant_id   text NOT NULL,
    kind        text NOT NULL,             -- type or predicate
    name        text NOT NULL,
    declared_by text,
    declared_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, kind, name)
);
