-- Article bodies a model wrote for graduated articles (issue 25, GRAD-1): review candidates
-- (LIFE-5), never part of the article until a reviewer affirms one (a new article version).
-- An article's erase deletes its candidates (LIFE-4).

CREATE TABLE article_candidates (
    tenant_id           text NOT NULL,
    id                  text NOT NULL,
    article_id          text NOT NULL,
    article_version     integer NOT NULL,   -- the version the body was written for
    memory_id           text,
    owner               text NOT NULL,   -- the article's owner: never its reviewer
    actor               text NOT NULL,   -- the key whose graduation asked the model
    body                text NOT NULL,
    model               text NOT NULL,
    status              text NOT NULL,   -- candidate, affirmed or rejected
    proposed_at         bigint NOT NULL,
    truncated           boolean NOT NULL DEFAULT false,
    injection_suspected boolean NOT NULL DEFAULT false,
    judged_by           text,
    judged_at           bigint,
    reason              text,
    PRIMARY KEY (tenant_id, id)
);

CREATE INDEX article_candidates_article ON article_candidates (tenant_id, article_id);
CREATE INDEX article_candidates_status ON article_candidates (tenant_id, status, id);
