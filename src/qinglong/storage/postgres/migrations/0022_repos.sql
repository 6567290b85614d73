-- Git subscriptions (issue 22, docs/subscriptions.md): a repository of scripts a project pulls.
-- A subscription's pulls are Runs of its pull task (kind "repo"), scheduled by its trigger;
-- the row keeps what it pulls (spec_json) and what its last pull found.
CREATE TABLE qinglong.repos (
    project_id        varchar(128) NOT NULL REFERENCES qinglong.projects (id),
    name              varchar(128) NOT NULL CHECK (length(name) >= 1),
    spec_json         jsonb        NOT NULL CHECK (jsonb_typeof(spec_json) = 'object'),
    created_by        varchar(128) NOT NULL,
    created_at_ms     bigint       NOT NULL CHECK (created_at_ms >= 0),
    updated_at_ms     bigint       NOT NULL,
    removed_at_ms     bigint,
    last_commit       varchar(64),
    last_pull_at_ms   bigint,
    last_report_json  jsonb        CHECK (last_report_json IS NULL OR
                                          jsonb_typeof(last_report_json) = 'object'),
    PRIMARY KEY (project_id, name),
    CHECK (updated_at_ms >= created_at_ms)
);

GRANT SELECT, INSERT, UPDATE ON qinglong.repos TO ql_admin, ql_web;
-- ql repo pull admits a Run of the pull task as ql task run does (ql_runtime): it reads which
-- subscriptions there are.
GRANT SELECT ON qinglong.repos TO ql_runtime;
