-- Notifications: channels (webhook, email, templates; the secret is kept here and never read
-- back by the CLI), rules attaching them to projects and tasks, the durable outbox every
-- `ql control` replica delivers from (one leased row at a time, SKIP LOCKED), the scan cursors
-- over Run outcomes and misfires, and the triggers waiting to fire on time again after a
-- misfire (docs/controls/notifications.md). ql_admin manages channels and rules; ql_runtime
-- reads them and runs the outbox; ql_worker has nothing here.
CREATE TABLE qinglong.notify_channels (
    name          varchar(64)   PRIMARY KEY
                  CHECK (name ~ '^[a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?$'),
    kind          varchar(16)   NOT NULL CHECK (kind IN ('webhook', 'email', 'template')),
    config_json   jsonb         NOT NULL CHECK (jsonb_typeof(config_json) = 'object'),
    secret        varchar(4096) CHECK (length(secret) >= 1),
    version       integer       NOT NULL CHECK (version >= 1),
    created_at_ms bigint        NOT NULL CHECK (created_at_ms >= 0),
    updated_at_ms bigint        NOT NULL,
    removed_at_ms bigint,
    CHECK (updated_at_ms >= created_at_ms),
    CHECK (removed_at_ms IS NULL OR secret IS NULL)
);

-- One row per (channel, project, task, event); task_id '*' covers every task of the project.
CREATE TABLE qinglong.notify_rules (
    channel       varchar(64)  NOT NULL REFERENCES qinglong.notify_channels (name),
    project_id    varchar(128) NOT NULL REFERENCES qinglong.projects (id),
    task_id       varchar(128) NOT NULL CHECK (length(task_id) >= 1),
    event         varchar(16)  NOT NULL CHECK (event IN ('failed', 'timed_out', 'lost',
                                                         'cancelled', 'misfired', 'recovered')),
    created_at_ms bigint       NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (channel, project_id, task_id, event)
);
CREATE INDEX notify_rules_match_idx ON qinglong.notify_rules (project_id, event, task_id);

-- One row per notification and channel: (channel, source_key) is what happened, once.
-- next_attempt_at_ms: when a pending row is due, or when a sending row's lease runs out.
CREATE TABLE qinglong.notify_outbox (
    id                 varchar(36)   PRIMARY KEY,
    channel            varchar(64)   NOT NULL,
    source_key         varchar(600)  NOT NULL,
    event              varchar(32)   NOT NULL,
    project_id         varchar(128)  NOT NULL,
    task_id            varchar(128),
    trigger_id         varchar(128),
    run_id             varchar(36),
    payload            jsonb         NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    occurred_at_ms     bigint        NOT NULL,
    status             varchar(16)   NOT NULL CHECK (status IN ('pending', 'sending',
                                                                'delivered', 'dead')),
    attempts           integer       NOT NULL CHECK (attempts >= 0),
    max_attempts       integer       NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
    next_attempt_at_ms bigint        NOT NULL,
    lease_owner        varchar(128),
    lease_token        varchar(36),
    last_status        integer,
    last_error         varchar(1024),
    created_at_ms      bigint        NOT NULL,
    updated_at_ms      bigint        NOT NULL,
    finished_at_ms     bigint,
    UNIQUE (channel, source_key),
    CHECK ((status = 'sending') = (lease_token IS NOT NULL AND lease_owner IS NOT NULL)),
    CHECK ((status IN ('delivered', 'dead')) = (finished_at_ms IS NOT NULL))
);
CREATE INDEX notify_outbox_due_idx ON qinglong.notify_outbox (next_attempt_at_ms, id)
    WHERE status IN ('pending', 'sending');
CREATE INDEX notify_outbox_created_idx ON qinglong.notify_outbox (created_at_ms, id);
CREATE INDEX notify_outbox_finished_idx ON qinglong.notify_outbox (finished_at_ms)
    WHERE finished_at_ms IS NOT NULL;

-- How far the dispatchers have looked at each source: everything up to frontier_ms was looked
-- at once, everything up to settled_ms a second time after it could no longer change.
CREATE TABLE qinglong.notify_cursors (
    source        varchar(16) PRIMARY KEY CHECK (source IN ('run_outcomes', 'misfires')),
    frontier_ms   bigint      NOT NULL,
    settled_ms    bigint      NOT NULL,
    updated_at_ms bigint      NOT NULL,
    CHECK (settled_ms <= frontier_ms)
);

-- A trigger whose latest misfire waits for its next on-time occurrence (the recovery).
CREATE TABLE qinglong.notify_recoveries (
    project_id       varchar(128) NOT NULL,
    trigger_id       varchar(128) NOT NULL,
    trigger_revision integer      NOT NULL,
    due_at_ms        bigint       NOT NULL,
    next_fire_at_ms  bigint       NOT NULL,
    policy           varchar(16)  NOT NULL,
    misfired_at_ms   bigint       NOT NULL,
    checked_at_ms    bigint       NOT NULL,
    PRIMARY KEY (project_id, trigger_id)
);

-- What the dispatchers scan: Runs that ended badly, and misfire decisions, by their time.
CREATE INDEX run_events_outcome_idx ON qinglong.run_events (created_at_ms)
    WHERE type IN ('run.failed', 'run.timed_out', 'run.lost', 'run.cancelled');
CREATE INDEX trigger_schedule_misfires_decided_idx
    ON qinglong.trigger_schedule_misfires (decided_at_ms)
    WHERE policy IN ('skip', 'fire_once');

REVOKE ALL ON qinglong.notify_channels, qinglong.notify_rules, qinglong.notify_outbox,
    qinglong.notify_cursors, qinglong.notify_recoveries FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON qinglong.notify_channels TO ql_admin;
GRANT SELECT, INSERT, DELETE ON qinglong.notify_rules TO ql_admin;
GRANT SELECT ON qinglong.notify_channels, qinglong.notify_rules TO ql_runtime;
GRANT SELECT, INSERT, UPDATE, DELETE ON qinglong.notify_outbox, qinglong.notify_recoveries
    TO ql_runtime;
GRANT SELECT, INSERT, UPDATE ON qinglong.notify_cursors TO ql_runtime;
