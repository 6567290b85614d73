-- Flows (issue 21, docs/controls/flows.md; PostgreSQL's migration 0016 has the reasoning):
-- published flows and their immutable, digest-pinned revisions; flow runs (unique per
-- project by their client request's key) and one step row per node of each, moved from
-- pending to released in the transaction that ends the Run before it.
CREATE TABLE flows (
    project_id       TEXT    NOT NULL REFERENCES projects (id),
    flow_id          TEXT    NOT NULL CHECK (length(flow_id) >= 1),
    current_revision INTEGER NOT NULL CHECK (current_revision >= 1),
    created_at_ms    INTEGER NOT NULL CHECK (created_at_ms >= 0),
    updated_at_ms    INTEGER NOT NULL,
    PRIMARY KEY (project_id, flow_id),
    CHECK (updated_at_ms >= created_at_ms)
) STRICT;

CREATE TABLE flow_revisions (
    project_id     TEXT    NOT NULL,
    flow_id        TEXT    NOT NULL,
    revision       INTEGER NOT NULL CHECK (revision >= 1),
    name           TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    spec_json      TEXT    NOT NULL CHECK (json_valid(spec_json) AND json_type(spec_json) = 'object'),
    pins_json      TEXT    NOT NULL CHECK (json_valid(pins_json) AND json_type(pins_json) = 'object'),
    content_digest TEXT    NOT NULL CHECK (length(content_digest) = 64),
    created_at_ms  INTEGER NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (project_id, flow_id, revision),
    FOREIGN KEY (project_id, flow_id) REFERENCES flows (project_id, flow_id)
) STRICT;

CREATE TABLE flow_runs (
    id              TEXT    NOT NULL PRIMARY KEY,
    project_id      TEXT    NOT NULL REFERENCES projects (id),
    flow_id         TEXT    NOT NULL,
    flow_revision   INTEGER NOT NULL,
    status          TEXT    NOT NULL
                    CHECK (status IN ('running', 'succeeded', 'failed', 'cancelled')),
    ended_reason    TEXT    CHECK (ended_reason IS NULL OR
                                   ended_reason IN ('nodes', 'cancelled', 'timeout')),
    idempotency_key TEXT    NOT NULL,
    requested_by    TEXT    NOT NULL,
    parameters      TEXT    CHECK (parameters IS NULL OR
                                   (json_valid(parameters) AND json_type(parameters) = 'object')),
    created_at_ms   INTEGER NOT NULL CHECK (created_at_ms >= 0),
    deadline_at_ms  INTEGER,
    finished_at_ms  INTEGER,
    UNIQUE (project_id, idempotency_key),
    FOREIGN KEY (project_id, flow_id, flow_revision)
        REFERENCES flow_revisions (project_id, flow_id, revision),
    CHECK ((status = 'running') = (finished_at_ms IS NULL))
) STRICT;

CREATE INDEX flow_runs_flow_idx ON flow_runs (project_id, flow_id, created_at_ms);
CREATE INDEX flow_runs_deadline_idx ON flow_runs (deadline_at_ms)
    WHERE status = 'running' AND deadline_at_ms IS NOT NULL;

CREATE TABLE flow_steps (
    flow_run_id    TEXT    NOT NULL REFERENCES flow_runs (id),
    node_id        TEXT    NOT NULL,
    status         TEXT    NOT NULL
                   CHECK (status IN ('pending', 'released', 'succeeded', 'failed', 'skipped')),
    run_id         TEXT,
    released_at_ms INTEGER,
    ended_at_ms    INTEGER,
    error_summary  TEXT    CHECK (error_summary IS NULL OR length(error_summary) <= 1024),
    PRIMARY KEY (flow_run_id, node_id),
    CHECK ((run_id IS NULL) = (status IN ('pending', 'skipped')))
) STRICT;

CREATE UNIQUE INDEX flow_steps_run_idx ON flow_steps (run_id) WHERE run_id IS NOT NULL;
