-- Flows (issue 21, docs/controls/flows.md): a versioned graph of a project's tasks.
--
-- flows / flow_revisions hold what is published, like tasks: a head naming the current
-- revision and immutable, digest-pinned revisions (the canonical graph, and the revision
-- and digest of every task it runs, pinned when it was published).
--
-- flow_runs is one started flow (unique per project by its client request's key), and
-- flow_steps one row per node of it, written when it starts. A node's row is the mutex of
-- its release: it moves from pending to released (with the Run admitted for it, whose own
-- key is unique too) in the same transaction that records the outcome of the node before
-- it, which is the transaction that ends that node's Run. Whoever ends a Run of a flow may
-- therefore admit the next ones: ql_worker gains INSERT on runs and run_attempts.
CREATE TABLE qinglong.flows (
    project_id       varchar(128) NOT NULL REFERENCES qinglong.projects (id),
    flow_id          varchar(128) NOT NULL CHECK (length(flow_id) >= 1),
    current_revision integer      NOT NULL CHECK (current_revision >= 1),
    created_at_ms    bigint       NOT NULL CHECK (created_at_ms >= 0),
    updated_at_ms    bigint       NOT NULL,
    PRIMARY KEY (project_id, flow_id),
    CHECK (updated_at_ms >= created_at_ms)
);

CREATE TABLE qinglong.flow_revisions (
    project_id     varchar(128) NOT NULL,
    flow_id        varchar(128) NOT NULL,
    revision       integer      NOT NULL CHECK (revision >= 1),
    name           varchar(255) NOT NULL CHECK (length(name) >= 1),
    spec_json      jsonb        NOT NULL CHECK (jsonb_typeof(spec_json) = 'object'),
    pins_json      jsonb        NOT NULL CHECK (jsonb_typeof(pins_json) = 'object'),
    content_digest char(64)     NOT NULL CHECK (content_digest ~ '^[0-9a-f]{64}$'),
    created_at_ms  bigint       NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (project_id, flow_id, revision),
    FOREIGN KEY (project_id, flow_id) REFERENCES qinglong.flows (project_id, flow_id)
);

CREATE TABLE qinglong.flow_runs (
    id              varchar(64)  PRIMARY KEY,
    project_id      varchar(128) NOT NULL REFERENCES qinglong.projects (id),
    flow_id         varchar(128) NOT NULL,
    flow_revision   integer      NOT NULL,
    status          varchar(16)  NOT NULL
                    CHECK (status IN ('running', 'succeeded', 'failed', 'cancelled')),
    ended_reason    varchar(32)  CHECK (ended_reason IS NULL OR
                                        ended_reason IN ('nodes', 'cancelled', 'timeout')),
    idempotency_key varchar(255) NOT NULL,
    requested_by    varchar(128) NOT NULL,
    parameters      jsonb        CHECK (parameters IS NULL OR jsonb_typeof(parameters) = 'object'),
    created_at_ms   bigint       NOT NULL CHECK (created_at_ms >= 0),
    deadline_at_ms  bigint,
    finished_at_ms  bigint,
    UNIQUE (project_id, idempotency_key),
    FOREIGN KEY (project_id, flow_id, flow_revision)
        REFERENCES qinglong.flow_revisions (project_id, flow_id, revision),
    CHECK ((status = 'running') = (finished_at_ms IS NULL))
);

CREATE INDEX flow_runs_flow_idx ON qinglong.flow_runs (project_id, flow_id, created_at_ms);
CREATE INDEX flow_runs_deadline_idx ON qinglong.flow_runs (deadline_at_ms)
    WHERE status = 'running' AND deadline_at_ms IS NOT NULL;

CREATE TABLE qinglong.flow_steps (
    flow_run_id    varchar(64)  NOT NULL REFERENCES qinglong.flow_runs (id),
    node_id        varchar(128) NOT NULL,
    status         varchar(16)  NOT NULL
                   CHECK (status IN ('pending', 'released', 'succeeded', 'failed', 'skipped')),
    run_id         varchar(64),
    released_at_ms bigint,
    ended_at_ms    bigint,
    -- why a step was skipped without running, when it is not its place in the graph
    -- (its task's plan could not be admitted)
    error_summary  varchar(1024),
    PRIMARY KEY (flow_run_id, node_id),
    CHECK ((run_id IS NULL) = (status IN ('pending', 'skipped')))
);

CREATE UNIQUE INDEX flow_steps_run_idx ON qinglong.flow_steps (run_id) WHERE run_id IS NOT NULL;

REVOKE ALL ON qinglong.flows, qinglong.flow_revisions, qinglong.flow_runs, qinglong.flow_steps
    FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON qinglong.flows TO ql_admin, ql_web;
GRANT SELECT, INSERT ON qinglong.flow_revisions TO ql_admin, ql_web;
GRANT SELECT ON qinglong.flows, qinglong.flow_revisions TO ql_runtime;
GRANT SELECT ON qinglong.flow_revisions TO ql_worker;
GRANT SELECT, INSERT, UPDATE ON qinglong.flow_runs, qinglong.flow_steps TO ql_runtime, ql_web;
GRANT SELECT, UPDATE ON qinglong.flow_runs, qinglong.flow_steps TO ql_worker;
GRANT INSERT ON qinglong.runs, qinglong.run_attempts TO ql_worker;
