-- Retries as durable state, overlap per trigger enforced by a partial unique index, and
-- cluster-wide limits (the SQLite profiles run Runs locally; log files stay on disk).
ALTER TABLE runs ADD COLUMN attempts_spent INTEGER NOT NULL DEFAULT 0
    CHECK (attempts_spent >= 0);
ALTER TABLE runs ADD COLUMN retry_at_ms INTEGER;
ALTER TABLE runs ADD COLUMN overlap_policy TEXT
    CHECK (overlap_policy IS NULL OR overlap_policy IN ('skip', 'queue', 'cancel_previous'));
ALTER TABLE runs ADD COLUMN overlap_key TEXT;
ALTER TABLE runs ADD COLUMN overlap_queue_limit INTEGER
    CHECK (overlap_queue_limit IS NULL OR overlap_queue_limit >= 0);

CREATE UNIQUE INDEX runs_overlap_active_idx ON runs (project_id, overlap_key)
    WHERE overlap_key IS NOT NULL AND status IN ('dispatching', 'running', 'retry_wait');
CREATE INDEX runs_overlap_queued_idx ON runs (project_id, overlap_key, queued_at_ms, id)
    WHERE overlap_key IS NOT NULL AND status = 'queued';
CREATE INDEX runs_retry_due_idx ON runs (retry_at_ms, id) WHERE status = 'retry_wait';

CREATE TABLE concurrency_limits (
    scope         TEXT    NOT NULL PRIMARY KEY CHECK (scope = 'global'),
    max_running   INTEGER NOT NULL CHECK (max_running >= 1),
    updated_at_ms INTEGER NOT NULL
) STRICT;
