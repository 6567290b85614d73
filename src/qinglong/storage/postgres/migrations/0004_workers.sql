-- Workers execute cluster Runs: the ql_worker role, retries as durable state, overlap per
-- trigger enforced by a partial unique index, log chunks streamed off the workers, and limits.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ql_worker' AND rolcanlogin
                   AND NOT (rolsuper OR rolcreatedb OR rolcreaterole OR rolreplication
                            OR rolbypassrls)) THEN
        RAISE EXCEPTION 'role ql_worker must exist, log in, and have no superuser, createdb, '
                        'createrole, replication or bypassrls attribute'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member
               WHERE r.rolname = 'ql_worker') THEN
        RAISE EXCEPTION 'role ql_worker must not be a member of other roles'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END $$;

ALTER TABLE qinglong.runs
    ADD COLUMN attempts_spent integer NOT NULL DEFAULT 0 CHECK (attempts_spent >= 0),
    ADD COLUMN retry_at_ms bigint,
    ADD COLUMN overlap_policy varchar(16) CHECK (overlap_policy IN ('skip', 'queue',
        'cancel_previous')),
    ADD COLUMN overlap_key varchar(128),
    ADD COLUMN overlap_queue_limit integer CHECK (overlap_queue_limit >= 0),
    ADD CONSTRAINT runs_overlap_shape CHECK ((overlap_policy IS NULL) = (overlap_key IS NULL)),
    ADD CONSTRAINT runs_retry_shape CHECK ((status = 'retry_wait') = (retry_at_ms IS NOT NULL));

-- At most one Run of an exclusive trigger is in progress at a time: the database, not a
-- check-then-act in the worker, makes overlap policies race-free.
CREATE UNIQUE INDEX runs_overlap_active_idx ON qinglong.runs (project_id, overlap_key)
    WHERE overlap_key IS NOT NULL AND status IN ('dispatching', 'running', 'retry_wait');
CREATE INDEX runs_overlap_queued_idx ON qinglong.runs (project_id, overlap_key, queued_at_ms, id)
    WHERE overlap_key IS NOT NULL AND status = 'queued';
CREATE INDEX runs_retry_due_idx ON qinglong.runs (retry_at_ms, id) WHERE status = 'retry_wait';
CREATE INDEX runs_active_task_idx ON qinglong.runs (project_id, task_id)
    WHERE status IN ('dispatching', 'running');

-- Output streamed off the workers while commands run: fenced, idempotent (attempt, seq), the
-- head kept and a bounded tail.
CREATE TABLE qinglong.run_log_chunks (
    attempt_id  varchar(36) NOT NULL,
    seq         integer     NOT NULL CHECK (seq >= 0),
    part        varchar(4)  NOT NULL CHECK (part IN ('head', 'tail')),
    byte_offset bigint      NOT NULL CHECK (byte_offset >= 0),
    data        bytea       NOT NULL CHECK (length(data) BETWEEN 1 AND 1048576),
    at_ms       bigint      NOT NULL,
    PRIMARY KEY (attempt_id, seq)
);

-- Cluster-wide limits (the per-task one is part of the task spec).
CREATE TABLE qinglong.concurrency_limits (
    scope         varchar(160) PRIMARY KEY CHECK (scope = 'global'),
    max_running   integer      NOT NULL CHECK (max_running >= 1),
    updated_at_ms bigint       NOT NULL
);

REVOKE ALL ON qinglong.run_log_chunks, qinglong.concurrency_limits FROM PUBLIC;
GRANT USAGE ON SCHEMA qinglong TO ql_worker;
GRANT SELECT ON qinglong.schema_migrations, qinglong.schema_capabilities,
    qinglong.task_execution_revisions, qinglong.concurrency_limits TO ql_worker;
GRANT SELECT, UPDATE ON qinglong.runs, qinglong.run_attempts TO ql_worker;
GRANT SELECT, INSERT ON qinglong.run_events TO ql_worker;
GRANT SELECT, INSERT, DELETE ON qinglong.run_log_chunks TO ql_worker;
GRANT SELECT, INSERT, UPDATE ON qinglong.instances TO ql_worker;
GRANT SELECT, DELETE ON qinglong.run_log_chunks TO ql_runtime;
GRANT SELECT ON qinglong.concurrency_limits TO ql_runtime;
GRANT SELECT, INSERT, UPDATE, DELETE ON qinglong.concurrency_limits TO ql_admin;

DO $$
BEGIN
    UPDATE qinglong.schema_capabilities
       SET contract_version = 4, migration_id = '0004_workers',
           capabilities = '["definitions", "run_core", "cluster_scheduler_admission", "role_grants", "attempt_leases", "workers"]',
           updated_at_ms = (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint
     WHERE contract_name = 'qinglong-control' AND contract_version = 3
       AND migration_id = '0003_lifecycle';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'capability row is not at version 3' USING ERRCODE = 'check_violation';
    END IF;
END $$;
