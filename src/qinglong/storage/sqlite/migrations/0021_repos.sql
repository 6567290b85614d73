-- Git subscriptions (issue 22, docs/subscriptions.md; PostgreSQL's migration 0022 has the
-- reasoning): a repository of scripts a project pulls, and what its last pull found.
CREATE TABLE repos (
    project_id        TEXT    NOT NULL REFERENCES projects (id),
    name              TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
    spec_json         TEXT    NOT NULL CHECK (json_valid(spec_json) AND json_type(spec_json) = 'object'),
    created_by        TEXT    NOT NULL,
    created_at_ms     INTEGER NOT NULL CHECK (created_at_ms >= 0),
    updated_at_ms     INTEGER NOT NULL,
    removed_at_ms     INTEGER,
    last_commit       TEXT,
    last_pull_at_ms   INTEGER,
    last_report_json  TEXT    CHECK (last_report_json IS NULL OR json_valid(last_report_json)),
    PRIMARY KEY (project_id, name),
    CHECK (updated_at_ms >= created_at_ms)
) STRICT;
