-- Notifications: channels (webhook, email, templates; the secret is kept here and never read
-- back by the CLI), rules attaching them to projects and tasks, the durable outbox `ql serve`
-- delivers from, the scan cursors over Run outcomes and misfires, and the triggers waiting
-- to fire on time again after a misfire (docs/controls/notifications.md).
CREATE TABLE notify_channels (
    name          TEXT    NOT NULL PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 64),
    kind          TEXT    NOT NULL CHECK (kind IN ('webhook', 'email', 'template')),
    config_json   TEXT    NOT NULL CHECK (json_valid(config_json) AND length(config_json) <= 65536),
    secret        TEXT    CHECK (secret IS NULL OR length(secret) BETWEEN 1 AND 4096),
    version       INTEGER NOT NULL CHECK (version >= 1),
    created_at_ms INTEGER NOT NULL CHECK (created_at_ms >= 0),
    updated_at_ms INTEGER NOT NULL CHECK (updated_at_ms >= created_at_ms),
    removed_at_ms INTEGER,
    CHECK (removed_at_ms IS NULL OR secret IS NULL)
) STRICT;

-- One row per (channel, project, task, event); task_id '*' covers every task of the project.
CREATE TABLE notify_rules (
    channel       TEXT    NOT NULL REFERENCES notify_channels (name),
    project_id    TEXT    NOT NULL REFERENCES projects (id),
    task_id       TEXT    NOT NULL CHECK (length(task_id) BETWEEN 1 AND 128),
    event         TEXT    NOT NULL CHECK (event IN ('failed', 'timed_out', 'lost', 'cancelled',
                                                    'misfired', 'recovered')),
    created_at_ms INTEGER NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (channel, project_id, task_id, event)
) STRICT;
CREATE INDEX notify_rules_match_idx ON notify_rules (project_id, event, task_id);

-- One row per notification and channel: (channel, source_key) is what happened, once.
-- next_attempt_at_ms: when a pending row is due, or when a sending row's lease runs out.
CREATE TABLE notify_outbox (
    id                 TEXT    NOT NULL PRIMARY KEY,
    channel            TEXT    NOT NULL,
    source_key         TEXT    NOT NULL CHECK (length(source_key) BETWEEN 1 AND 600),
    event              TEXT    NOT NULL CHECK (length(event) BETWEEN 1 AND 32),
    project_id         TEXT    NOT NULL,
    task_id            TEXT,
    trigger_id         TEXT,
    run_id             TEXT,
    payload            TEXT    NOT NULL CHECK (json_valid(payload) AND length(payload) <= 65536),
    occurred_at_ms     INTEGER NOT NULL,
    status             TEXT    NOT NULL CHECK (status IN ('pending', 'sending', 'delivered',
                                                          'dead')),
    attempts           INTEGER NOT NULL CHECK (attempts >= 0),
    max_attempts       INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
    next_attempt_at_ms INTEGER NOT NULL,
    lease_owner        TEXT,
    lease_token        TEXT,
    last_status        INTEGER,
    last_error         TEXT    CHECK (last_error IS NULL OR length(last_error) <= 1024),
    created_at_ms      INTEGER NOT NULL,
    updated_at_ms      INTEGER NOT NULL,
    finished_at_ms     INTEGER,
    UNIQUE (channel, source_key),
    CHECK ((status = 'sending') = (lease_token IS NOT NULL AND lease_owner IS NOT NULL)),
    CHECK ((status IN ('delivered', 'dead')) = (finished_at_ms IS NOT NULL))
) STRICT;
CREATE INDEX notify_outbox_due_idx ON notify_outbox (next_attempt_at_ms, id)
    WHERE status IN ('pending', 'sending');
CREATE INDEX notify_outbox_created_idx ON notify_outbox (created_at_ms, id);
CREATE INDEX notify_outbox_finished_idx ON notify_outbox (finished_at_ms)
    WHERE finished_at_ms IS NOT NULL;

-- How far the dispatcher has looked at each source: everything up to frontier_ms was looked
-- at once, everything up to settled_ms a second time after it could no longer change.
CREATE TABLE notify_cursors (
    source        TEXT    NOT NULL PRIMARY KEY CHECK (source IN ('run_outcomes', 'misfires')),
    frontier_ms   INTEGER NOT NULL,
    settled_ms    INTEGER NOT NULL CHECK (settled_ms <= frontier_ms),
    updated_at_ms INTEGER NOT NULL
) STRICT;

-- A trigger whose latest misfire waits for its next on-time occurrence (the recovery).
CREATE TABLE notify_recoveries (
    project_id       TEXT    NOT NULL,
    trigger_id       TEXT    NOT NULL,
    trigger_revision INTEGER NOT NULL,
    due_at_ms        INTEGER NOT NULL,
    next_fire_at_ms  INTEGER NOT NULL,
    policy           TEXT    NOT NULL,
    misfired_at_ms   INTEGER NOT NULL,
    checked_at_ms    INTEGER NOT NULL,
    PRIMARY KEY (project_id, trigger_id)
) STRICT;

-- What the dispatcher scans: Runs that ended badly, and misfire decisions, by their time.
CREATE INDEX run_events_outcome_idx ON run_events (created_at_ms)
    WHERE type IN ('run.failed', 'run.timed_out', 'run.lost', 'run.cancelled');
CREATE INDEX trigger_schedule_misfires_decided_idx ON trigger_schedule_misfires (decided_at_ms)
    WHERE policy IN ('skip', 'fire_once');
