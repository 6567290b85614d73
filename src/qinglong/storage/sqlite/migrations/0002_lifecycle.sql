-- Leases on attempts (the executor holds one while it runs a Run), soft deletion of task and
-- trigger heads, the history of project archivals, and the heartbeats of the processes that
-- serve the database.
ALTER TABLE run_attempts ADD COLUMN lease_generation INTEGER NOT NULL DEFAULT 0
    CHECK (lease_generation >= 0);
ALTER TABLE run_attempts ADD COLUMN lease_token_digest TEXT
    CHECK (lease_token_digest IS NULL OR length(lease_token_digest) = 64);
ALTER TABLE run_attempts ADD COLUMN lease_expires_at_ms INTEGER;

CREATE INDEX run_attempts_active_idx ON run_attempts (status, lease_expires_at_ms, id)
    WHERE status IN ('claimed', 'starting', 'running');
CREATE INDEX runs_status_idx ON runs (status, queued_at_ms, id);
CREATE INDEX runs_task_idx ON runs (project_id, task_id, created_at_ms);

ALTER TABLE task_definitions ADD COLUMN deleted_at_ms INTEGER;
ALTER TABLE triggers ADD COLUMN deleted_at_ms INTEGER;

CREATE TABLE instances (
    instance_id   TEXT    NOT NULL PRIMARY KEY CHECK (length(instance_id) BETWEEN 1 AND 128),
    role          TEXT    NOT NULL CHECK (role IN ('serve', 'control', 'worker', 'web')),
    host          TEXT    NOT NULL,
    pid           INTEGER NOT NULL,
    started_at_ms INTEGER NOT NULL,
    seen_at_ms    INTEGER NOT NULL,
    stopped_at_ms INTEGER
) STRICT;

-- When each project was archived and restored (the audit's evidence: nothing fires meanwhile).
CREATE TABLE project_archivals (
    project_id     TEXT    NOT NULL REFERENCES projects (id),
    archived_at_ms INTEGER NOT NULL,
    restored_at_ms INTEGER CHECK (restored_at_ms IS NULL OR restored_at_ms >= archived_at_ms),
    PRIMARY KEY (project_id, archived_at_ms)
) STRICT;
INSERT INTO project_archivals (project_id, archived_at_ms, restored_at_ms)
SELECT id, updated_at_ms, NULL FROM projects WHERE status = 'archived';
