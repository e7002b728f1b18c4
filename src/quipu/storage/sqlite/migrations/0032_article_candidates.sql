-- Article bodies a model wrote for graduated articles (issue 25, GRAD-1): review candidates
-- (LIFE-5), never part of the article until a reviewer affirms one (a new article version).
-- An article's erase deletes its candidates (LIFE-4).

CREATE TABLE article_candidates (
    tenant_id           TEXT NOT NULL,
    id                  TEXT NOT NULL,
    article_id          TEXT NOT NULL,
    article_version     INTEGER NOT NULL,   -- the version the body was written for
    memory_id           TEXT,
    owner               TEXT NOT NULL,   -- the article's owner: never its reviewer
    actor               TEXT NOT NULL,   -- the key whose graduation asked the model
    body                TEXT NOT NULL,
    model               TEXT NOT NULL,
    status              TEXT NOT NULL,   -- candidate, affirmed or rejected
    proposed_at         INTEGER NOT NULL,
    truncated           INTEGER NOT NULL DEFAULT 0,
    injection_suspected INTEGER NOT NULL DEFAULT 0,
    judged_by           TEXT,
    judged_at           INTEGER,
    reason              TEXT,
    PRIMARY KEY (tenant_id, id)
);

CREATE INDEX article_candidates_article ON article_candidates (tenant_id, article_id);
CREATE INDEX article_candidates_status ON article_candidates (tenant_id, status, id);
