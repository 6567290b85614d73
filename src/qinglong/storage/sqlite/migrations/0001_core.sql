-- qinglong SQLite schema: definitions, schedules, runs. Mirrors the PostgreSQL design.
CREATE TABLE projects (
    id            TEXT    NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 128),
    slug          TEXT    NOT NULL UNIQUE CHECK (length(slug) BETWEEN 1 AND 128),
    name          TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    status        TEXT    NOT NULL CHECK (status IN ('active', 'archived')),
    version       INTEGER NOT NULL CHECK (version BETWEEN 1 AND 2147483647),
    created_at_ms INTEGER NOT NULL CHECK (created_at_ms >= 0),
    updated_at_ms INTEGER NOT NULL CHECK (updated_at_ms >= created_at_ms)
) STRICT;

CREATE TABLE task_definitions (
    project_id       TEXT    NOT NULL REFERENCES projects (id),
    task_id          TEXT    NOT NULL CHECK (length(task_id) BETWEEN 1 AND 128),
    current_revision INTEGER NOT NULL CHECK (current_revision BETWEEN 1 AND 2147483647),
    created_at_ms    INTEGER NOT NULL CHECK (created_at_ms >= 0),
    updated_at_ms    INTEGER NOT NULL CHECK (updated_at_ms >= created_at_ms),
    PRIMARY KEY (project_id, task_id)
) STRICT;

CREATE TABLE task_definition_revisions (
    project_id     TEXT    NOT NULL,
    task_id        TEXT    NOT NULL,
    revision       INTEGER NOT NULL CHECK (revision BETWEEN 1 AND 2147483647),
    name           TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    kind           TEXT    NOT NULL CHECK (kind = 'command'),
    spec_json      TEXT    NOT NULL CHECK (json_valid(spec_json) AND length(spec_json) <= 262144),
    enabled        INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    content_digest TEXT    NOT NULL CHECK (length(content_digest) = 64),
    created_at_ms  INTEGER NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (project_id, task_id, revision),
    FOREIGN KEY (project_id, task_id) REFERENCES task_definitions (project_id, task_id)
) STRICT;

CREATE TABLE task_execution_revisions (
    project_id            TEXT    NOT NULL,
    task_id               TEXT    NOT NULL,
    source_revision       INTEGER NOT NULL,
    task_revision         TEXT    NOT NULL CHECK (length(task_revision) <= 96),
    source_content_digest TEXT    NOT NULL CHECK (length(source_content_digest) = 64),
    executor_type         TEXT    NOT NULL CHECK (executor_type = 'local_process'),
    plan_schema           TEXT    NOT NULL CHECK (plan_schema = 'qinglong/command-execution@v1'),
    plan_json             TEXT    NOT NULL CHECK (json_valid(plan_json)),
    content_digest        TEXT    NOT NULL CHECK (length(content_digest) = 64),
    created_at_ms         INTEGER NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (project_id, task_id, source_revision, executor_type),
    UNIQUE (project_id, task_id, task_revision, executor_type),
    FOREIGN KEY (project_id, task_id, source_revision)
        REFERENCES task_definition_revisions (project_id, task_id, revision)
) STRICT;

CREATE TABLE triggers (
    project_id       TEXT    NOT NULL REFERENCES projects (id),
    trigger_id       TEXT    NOT NULL CHECK (length(trigger_id) BETWEEN 1 AND 128),
    task_id          TEXT    NOT NULL,
    current_revision INTEGER NOT NULL CHECK (current_revision BETWEEN 1 AND 2147483647),
    created_at_ms    INTEGER NOT NULL CHECK (created_at_ms >= 0),
    updated_at_ms    INTEGER NOT NULL CHECK (updated_at_ms >= created_at_ms),
    PRIMARY KEY (project_id, trigger_id),
    UNIQUE (project_id, trigger_id, task_id),
    FOREIGN KEY (project_id, task_id) REFERENCES task_definitions (project_id, task_id)
) STRICT;

CREATE TABLE trigger_revisions (
    project_id          TEXT    NOT NULL,
    trigger_id          TEXT    NOT NULL,
    revision            INTEGER NOT NULL CHECK (revision BETWEEN 1 AND 2147483647),
    task_id             TEXT    NOT NULL,
    task_revision       INTEGER NOT NULL,
    task_content_digest TEXT    NOT NULL CHECK (length(task_content_digest) = 64),
    spec_json           TEXT    NOT NULL CHECK (json_valid(spec_json) AND length(spec_json) <= 16384),
    enabled             INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    content_digest      TEXT    NOT NULL CHECK (length(content_digest) = 64),
    created_at_ms       INTEGER NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (project_id, trigger_id, revision),
    FOREIGN KEY (project_id, trigger_id, task_id)
        REFERENCES triggers (project_id, trigger_id, task_id),
    FOREIGN KEY (project_id, task_id, task_revision)
        REFERENCES task_definition_revisions (project_id, task_id, revision)
) STRICT;

CREATE TABLE trigger_schedules (
    project_id           TEXT    NOT NULL,
    trigger_id           TEXT    NOT NULL,
    trigger_revision     INTEGER NOT NULL,
    next_fire_at_ms      INTEGER CHECK (next_fire_at_ms IS NULL OR next_fire_at_ms >= 0),
    last_scheduled_at_ms INTEGER CHECK (last_scheduled_at_ms IS NULL OR last_scheduled_at_ms >= 0),
    state_version        INTEGER NOT NULL CHECK (state_version BETWEEN 0 AND 2147483647),
    updated_at_ms        INTEGER NOT NULL CHECK (updated_at_ms >= 0),
    PRIMARY KEY (project_id, trigger_id),
    FOREIGN KEY (project_id, trigger_id, trigger_revision)
        REFERENCES trigger_revisions (project_id, trigger_id, revision)
) STRICT;

-- NULL cursors (to initialise) sort first in SQLite's ascending order.
CREATE INDEX trigger_schedules_due_idx
    ON trigger_schedules (next_fire_at_ms, project_id, trigger_id);

-- Misfire decisions: the stretch of occurrences a decision dropped (audit evidence).
CREATE TABLE trigger_schedule_misfires (
    project_id       TEXT    NOT NULL,
    trigger_id       TEXT    NOT NULL,
    trigger_revision INTEGER NOT NULL,
    due_at_ms        INTEGER NOT NULL,
    skipped_through_ms INTEGER NOT NULL CHECK (skipped_through_ms >= due_at_ms),
    next_fire_at_ms  INTEGER NOT NULL CHECK (next_fire_at_ms > skipped_through_ms),
    policy           TEXT    NOT NULL CHECK (policy IN ('skip', 'fire_once')),
    run_id           TEXT,
    decided_at_ms    INTEGER NOT NULL,
    PRIMARY KEY (project_id, trigger_id, trigger_revision, due_at_ms)
) STRICT;

CREATE TABLE runs (
    id                     TEXT    NOT NULL PRIMARY KEY,
    project_id             TEXT    NOT NULL REFERENCES projects (id),
    task_id                TEXT    NOT NULL,
    task_revision          TEXT    NOT NULL,
    task_name              TEXT,
    task_snapshot_ref      TEXT,
    trigger_id             TEXT,
    trigger_revision       INTEGER,
    trigger_type           TEXT    NOT NULL,
    execution_origin       TEXT    NOT NULL,
    execution_owner        TEXT    NOT NULL CHECK (execution_owner = 'runtime'),
    triggered_by           TEXT,
    scheduled_for_ms       INTEGER CHECK (scheduled_for_ms IS NULL OR scheduled_for_ms >= 0),
    status                 TEXT    NOT NULL CHECK (status IN ('created', 'queued', 'dispatching',
                               'running', 'waiting_approval', 'retry_wait', 'lost', 'succeeded',
                               'failed', 'cancelled', 'timed_out')),
    version                INTEGER NOT NULL CHECK (version >= 0),
    event_sequence         INTEGER NOT NULL CHECK (event_sequence >= 0),
    priority               INTEGER NOT NULL DEFAULT 0,
    idempotency_key        TEXT,
    created_at_ms          INTEGER NOT NULL,
    queued_at_ms           INTEGER,
    started_at_ms          INTEGER,
    finished_at_ms         INTEGER,
    cancel_requested_at_ms INTEGER,
    cancel_reason          TEXT CHECK (cancel_reason IS NULL OR cancel_reason IN
                               ('user', 'policy', 'shutdown', 'reconcile', 'timeout')),
    error_code             TEXT,
    error_summary          TEXT CHECK (error_summary IS NULL OR length(error_summary) <= 1024)
) STRICT;

CREATE UNIQUE INDEX runs_idempotency_key_idx ON runs (project_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_trigger_idx ON runs (project_id, trigger_id, scheduled_for_ms);
CREATE INDEX runs_project_created_idx ON runs (project_id, created_at_ms, id);
CREATE INDEX runs_queued_idx ON runs (queued_at_ms, id) WHERE status = 'queued';

CREATE TABLE run_attempts (
    id                TEXT    NOT NULL PRIMARY KEY,
    run_id            TEXT    NOT NULL REFERENCES runs (id),
    attempt           INTEGER NOT NULL CHECK (attempt >= 1),
    status            TEXT    NOT NULL CHECK (status IN ('claimed', 'starting', 'running',
                          'succeeded', 'failed', 'cancelled', 'timed_out', 'lost')),
    executor_type     TEXT    NOT NULL,
    worker_id         TEXT,
    executor_handle   TEXT,
    pid               INTEGER CHECK (pid IS NULL OR pid >= 1),
    log_path          TEXT,
    callback_sequence INTEGER NOT NULL DEFAULT 0,
    created_at_ms     INTEGER NOT NULL,
    started_at_ms     INTEGER,
    finished_at_ms    INTEGER,
    exit_code         INTEGER,
    error_code        TEXT,
    error_summary     TEXT CHECK (error_summary IS NULL OR length(error_summary) <= 1024),
    UNIQUE (run_id, attempt)
) STRICT;

CREATE INDEX run_attempts_status_idx ON run_attempts (status, run_id);

CREATE TABLE run_events (
    id            TEXT    NOT NULL PRIMARY KEY,
    run_id        TEXT    NOT NULL REFERENCES runs (id),
    sequence      INTEGER NOT NULL CHECK (sequence >= 1),
    type          TEXT    NOT NULL CHECK (length(type) BETWEEN 1 AND 128),
    dedupe_key    TEXT,
    actor_type    TEXT    NOT NULL CHECK (actor_type IN ('user', 'scheduler', 'executor',
                      'reconciler', 'system', 'worker')),
    actor_id      TEXT,
    attempt_id    TEXT REFERENCES run_attempts (id),
    payload       TEXT    NOT NULL CHECK (json_valid(payload) AND length(payload) <= 16384),
    created_at_ms INTEGER NOT NULL,
    UNIQUE (run_id, sequence)
) STRICT;

CREATE UNIQUE INDEX run_events_dedupe_idx ON run_events (run_id, dedupe_key)
    WHERE dedupe_key IS NOT NULL;
