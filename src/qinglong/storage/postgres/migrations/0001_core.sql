-- qinglong PostgreSQL schema: definitions, the cluster schedule with its lease fence, runs.
CREATE TABLE qinglong.schema_capabilities (
    contract_name    varchar(64)  PRIMARY KEY,
    contract_version integer      NOT NULL CHECK (contract_version >= 1),
    migration_id     varchar(128) NOT NULL,
    capabilities     jsonb        NOT NULL CHECK (jsonb_typeof(capabilities) = 'array'),
    updated_at_ms    bigint       NOT NULL CHECK (updated_at_ms >= 0),
    CONSTRAINT schema_capabilities_migration_fk FOREIGN KEY (migration_id)
        REFERENCES qinglong.schema_migrations (migration_id) DEFERRABLE INITIALLY DEFERRED
);

INSERT INTO qinglong.schema_capabilities
    (contract_name, contract_version, migration_id, capabilities, updated_at_ms)
VALUES ('qinglong-control', 1, '0001_core',
        '["definitions", "run_core", "cluster_scheduler_admission"]',
        (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint);

CREATE TABLE qinglong.projects (
    id            varchar(128) PRIMARY KEY CHECK (id ~ '^[a-z0-9](?:[a-z0-9-]{0,126}[a-z0-9])?$'),
    slug          varchar(128) NOT NULL UNIQUE,
    name          varchar(255) NOT NULL CHECK (length(name) >= 1),
    status        varchar(16)  NOT NULL CHECK (status IN ('active', 'archived')),
    version       integer      NOT NULL CHECK (version >= 1),
    created_at_ms bigint       NOT NULL CHECK (created_at_ms >= 0),
    updated_at_ms bigint       NOT NULL,
    CHECK (updated_at_ms >= created_at_ms)
);

CREATE TABLE qinglong.task_definitions (
    project_id       varchar(128) NOT NULL REFERENCES qinglong.projects (id),
    task_id          varchar(128) NOT NULL CHECK (length(task_id) >= 1),
    current_revision integer      NOT NULL CHECK (current_revision >= 1),
    created_at_ms    bigint       NOT NULL CHECK (created_at_ms >= 0),
    updated_at_ms    bigint       NOT NULL,
    PRIMARY KEY (project_id, task_id),
    CHECK (updated_at_ms >= created_at_ms)
);

CREATE TABLE qinglong.task_definition_revisions (
    project_id     varchar(128) NOT NULL,
    task_id        varchar(128) NOT NULL,
    revision       integer      NOT NULL CHECK (revision >= 1),
    name           varchar(255) NOT NULL CHECK (length(name) >= 1),
    kind           varchar(32)  NOT NULL CHECK (kind = 'command'),
    spec_json      jsonb        NOT NULL CHECK (jsonb_typeof(spec_json) = 'object'),
    enabled        boolean      NOT NULL,
    content_digest char(64)     NOT NULL CHECK (content_digest ~ '^[0-9a-f]{64}$'),
    created_at_ms  bigint       NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (project_id, task_id, revision),
    FOREIGN KEY (project_id, task_id) REFERENCES qinglong.task_definitions (project_id, task_id)
);

CREATE TABLE qinglong.task_execution_revisions (
    project_id            varchar(128) NOT NULL,
    task_id               varchar(128) NOT NULL,
    source_revision       integer      NOT NULL,
    task_revision         varchar(96)  NOT NULL,
    source_content_digest char(64)     NOT NULL,
    executor_type         varchar(32)  NOT NULL CHECK (executor_type = 'remote_worker'),
    plan_schema           varchar(64)  NOT NULL CHECK (plan_schema = 'qinglong/command-execution@v1'),
    plan_json             jsonb        NOT NULL CHECK (jsonb_typeof(plan_json) = 'object'),
    content_digest        char(64)     NOT NULL CHECK (content_digest ~ '^[0-9a-f]{64}$'),
    created_at_ms         bigint       NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (project_id, task_id, source_revision, executor_type),
    UNIQUE (project_id, task_id, task_revision, executor_type),
    CHECK (task_revision = 'qltd:v1:' || source_revision || ':' || source_content_digest),
    FOREIGN KEY (project_id, task_id, source_revision)
        REFERENCES qinglong.task_definition_revisions (project_id, task_id, revision)
);

CREATE TABLE qinglong.triggers (
    project_id       varchar(128) NOT NULL REFERENCES qinglong.projects (id),
    trigger_id       varchar(128) NOT NULL CHECK (length(trigger_id) >= 1),
    task_id          varchar(128) NOT NULL,
    current_revision integer      NOT NULL CHECK (current_revision >= 1),
    created_at_ms    bigint       NOT NULL CHECK (created_at_ms >= 0),
    updated_at_ms    bigint       NOT NULL,
    PRIMARY KEY (project_id, trigger_id),
    UNIQUE (project_id, trigger_id, task_id),
    FOREIGN KEY (project_id, task_id) REFERENCES qinglong.task_definitions (project_id, task_id),
    CHECK (updated_at_ms >= created_at_ms)
);

CREATE TABLE qinglong.trigger_revisions (
    project_id          varchar(128) NOT NULL,
    trigger_id          varchar(128) NOT NULL,
    revision            integer      NOT NULL CHECK (revision >= 1),
    task_id             varchar(128) NOT NULL,
    task_revision       integer      NOT NULL,
    task_content_digest char(64)     NOT NULL,
    spec_json           jsonb        NOT NULL CHECK (jsonb_typeof(spec_json) = 'object'),
    enabled             boolean      NOT NULL,
    content_digest      char(64)     NOT NULL CHECK (content_digest ~ '^[0-9a-f]{64}$'),
    created_at_ms       bigint       NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (project_id, trigger_id, revision),
    FOREIGN KEY (project_id, trigger_id, task_id)
        REFERENCES qinglong.triggers (project_id, trigger_id, task_id),
    FOREIGN KEY (project_id, task_id, task_revision)
        REFERENCES qinglong.task_definition_revisions (project_id, task_id, revision)
);

-- One row per trigger head: the durable cursor and the four-part lease fence.
CREATE TABLE qinglong.trigger_schedules (
    project_id           varchar(128) NOT NULL,
    trigger_id           varchar(128) NOT NULL,
    trigger_revision     integer      NOT NULL,
    next_fire_at_ms      bigint       CHECK (next_fire_at_ms >= 0),
    last_scheduled_at_ms bigint       CHECK (last_scheduled_at_ms >= 0),
    state_version        integer      NOT NULL CHECK (state_version >= 0),
    claim_owner          varchar(128) CHECK (claim_owner ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'),
    claim_token          uuid,
    claim_version        integer      NOT NULL CHECK (claim_version >= 0),
    claim_expires_at_ms  bigint,
    updated_at_ms        bigint       NOT NULL CHECK (updated_at_ms >= 0),
    PRIMARY KEY (project_id, trigger_id),
    FOREIGN KEY (project_id, trigger_id, trigger_revision)
        REFERENCES qinglong.trigger_revisions (project_id, trigger_id, revision) ON DELETE RESTRICT,
    CONSTRAINT trigger_schedules_claim_shape CHECK (
        (claim_owner IS NULL AND claim_token IS NULL AND claim_expires_at_ms IS NULL)
        OR (claim_owner IS NOT NULL AND claim_token IS NOT NULL AND claim_expires_at_ms IS NOT NULL
            AND claim_version >= 1 AND claim_expires_at_ms > updated_at_ms)
    )
);

CREATE INDEX trigger_schedules_due_idx ON qinglong.trigger_schedules
    (next_fire_at_ms NULLS FIRST, project_id, trigger_id);
CREATE INDEX trigger_schedules_claim_expiry_idx ON qinglong.trigger_schedules
    (claim_expires_at_ms, project_id, trigger_id) WHERE claim_token IS NOT NULL;

-- Every claim ever granted (append-only): the audit's evidence of who held each occurrence.
CREATE TABLE qinglong.trigger_schedule_claims (
    project_id       varchar(128) NOT NULL,
    trigger_id       varchar(128) NOT NULL,
    trigger_revision integer      NOT NULL,
    claim_version    integer      NOT NULL,
    claim_owner      varchar(128) NOT NULL,
    claim_token      uuid         NOT NULL,
    cursor_ms        bigint,
    acquired_at_ms   bigint       NOT NULL,
    expires_at_ms    bigint       NOT NULL CHECK (expires_at_ms > acquired_at_ms),
    PRIMARY KEY (project_id, trigger_id, claim_version)
);

-- Misfire decisions: the stretch of occurrences a decision dropped.
CREATE TABLE qinglong.trigger_schedule_misfires (
    project_id         varchar(128) NOT NULL,
    trigger_id         varchar(128) NOT NULL,
    trigger_revision   integer      NOT NULL,
    due_at_ms          bigint       NOT NULL,
    skipped_through_ms bigint       NOT NULL,
    next_fire_at_ms    bigint       NOT NULL,
    policy             varchar(16)  NOT NULL CHECK (policy IN ('skip', 'fire_once')),
    run_id             varchar(36),
    claim_version      integer,
    decided_at_ms      bigint       NOT NULL,
    PRIMARY KEY (project_id, trigger_id, trigger_revision, due_at_ms),
    CHECK (skipped_through_ms >= due_at_ms AND next_fire_at_ms > skipped_through_ms)
);

CREATE TABLE qinglong.runs (
    id                     varchar(36)  PRIMARY KEY,
    project_id             varchar(128) NOT NULL REFERENCES qinglong.projects (id),
    task_id                varchar(128) NOT NULL,
    task_revision          varchar(128) NOT NULL,
    task_name              varchar(255),
    task_snapshot_ref      varchar(512),
    trigger_id             varchar(128),
    trigger_revision       integer,
    trigger_type           varchar(64)  NOT NULL,
    execution_origin       varchar(64)  NOT NULL,
    execution_owner        varchar(16)  NOT NULL CHECK (execution_owner = 'runtime'),
    triggered_by           varchar(255),
    scheduled_for_ms       bigint       CHECK (scheduled_for_ms >= 0),
    status                 varchar(32)  NOT NULL CHECK (status IN ('created', 'queued',
                               'dispatching', 'running', 'waiting_approval', 'retry_wait', 'lost',
                               'succeeded', 'failed', 'cancelled', 'timed_out')),
    version                integer      NOT NULL CHECK (version >= 0),
    event_sequence         integer      NOT NULL CHECK (event_sequence >= 0),
    priority               integer      NOT NULL DEFAULT 0,
    idempotency_key        varchar(255),
    created_at_ms          bigint       NOT NULL,
    queued_at_ms           bigint,
    started_at_ms          bigint,
    finished_at_ms         bigint,
    cancel_requested_at_ms bigint,
    cancel_reason          varchar(16)  CHECK (cancel_reason IN ('user', 'policy', 'shutdown',
                               'reconcile', 'timeout')),
    error_code             varchar(128),
    error_summary          varchar(1024)
);

CREATE UNIQUE INDEX runs_idempotency_key_idx ON qinglong.runs (project_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_trigger_idx ON qinglong.runs (project_id, trigger_id, scheduled_for_ms);
CREATE INDEX runs_project_created_idx ON qinglong.runs (project_id, created_at_ms, id);
CREATE INDEX runs_dispatch_idx ON qinglong.runs (priority DESC, queued_at_ms, id)
    WHERE status IN ('queued', 'dispatching') AND cancel_requested_at_ms IS NULL;

-- Attempts and events carry no foreign key to runs on purpose: under SERIALIZABLE, the
-- referential checks of concurrent admissions read each other's index pages and PostgreSQL
-- aborts one as a false serialization conflict. One admission transaction writes the Run,
-- its Attempt and both events together; `ql audit` checks that shape.
CREATE TABLE qinglong.run_attempts (
    id                  varchar(36)   PRIMARY KEY,
    run_id              varchar(36)   NOT NULL,
    attempt             integer       NOT NULL CHECK (attempt >= 1),
    status              varchar(32)   NOT NULL CHECK (status IN ('claimed', 'starting', 'running',
                            'succeeded', 'failed', 'cancelled', 'timed_out', 'lost')),
    executor_type       varchar(64)   NOT NULL,
    worker_id           varchar(128),
    worker_session_id   varchar(36),
    worker_generation   integer,
    executor_handle     varchar(2048),
    pid                 integer       CHECK (pid >= 1),
    log_artifact_id     varchar(36),
    lease_token         varchar(128),
    lease_token_digest  char(64),
    lease_generation    integer,
    lease_version       integer,
    lease_expires_at_ms bigint,
    offer_id            varchar(128),
    deadline_at_ms      bigint,
    callback_token_hash varchar(128),
    callback_sequence   integer       NOT NULL DEFAULT 0 CHECK (callback_sequence >= 0),
    created_at_ms       bigint        NOT NULL,
    started_at_ms       bigint,
    finished_at_ms      bigint,
    exit_code           integer,
    error_code          varchar(128),
    error_summary       varchar(1024),
    UNIQUE (run_id, attempt)
);

CREATE INDEX run_attempts_status_idx ON qinglong.run_attempts (status, run_id, created_at_ms, id);
CREATE INDEX run_attempts_lease_idx ON qinglong.run_attempts (lease_expires_at_ms, id)
    WHERE lease_expires_at_ms IS NOT NULL;

CREATE TABLE qinglong.run_events (
    id            varchar(36)  PRIMARY KEY,
    run_id        varchar(36)  NOT NULL,
    sequence      integer      NOT NULL CHECK (sequence >= 1),
    type          varchar(128) NOT NULL CHECK (length(type) >= 1),
    dedupe_key    varchar(255),
    actor_type    varchar(32)  NOT NULL CHECK (actor_type IN ('user', 'scheduler', 'executor',
                      'reconciler', 'system', 'worker')),
    actor_id      varchar(255),
    attempt_id    varchar(36),
    payload       jsonb        NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    created_at_ms bigint       NOT NULL,
    UNIQUE (run_id, sequence)
);

CREATE UNIQUE INDEX run_events_dedupe_idx ON qinglong.run_events (run_id, dedupe_key)
    WHERE dedupe_key IS NOT NULL;
