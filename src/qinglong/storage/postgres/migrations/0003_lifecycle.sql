-- Leases on attempts (an executor holds one while it runs a Run, fenced by generation and
-- token digest), soft deletion of task and trigger heads, and process heartbeats.
ALTER TABLE qinglong.run_attempts
    DROP COLUMN worker_session_id,
    DROP COLUMN worker_generation,
    DROP COLUMN lease_token,
    DROP COLUMN lease_version,
    DROP COLUMN offer_id,
    DROP COLUMN callback_token_hash,
    DROP COLUMN log_artifact_id,
    ADD COLUMN log_path varchar(4096);
UPDATE qinglong.run_attempts SET lease_generation = 0 WHERE lease_generation IS NULL;
ALTER TABLE qinglong.run_attempts
    ALTER COLUMN lease_generation SET DEFAULT 0,
    ALTER COLUMN lease_generation SET NOT NULL,
    ADD CONSTRAINT run_attempts_lease_generation_check CHECK (lease_generation >= 0),
    ADD CONSTRAINT run_attempts_lease_shape CHECK (
        (lease_token_digest IS NULL AND lease_expires_at_ms IS NULL)
        OR (lease_token_digest ~ '^[0-9a-f]{64}$' AND lease_expires_at_ms IS NOT NULL
            AND worker_id IS NOT NULL));

DROP INDEX qinglong.run_attempts_lease_idx;
CREATE INDEX run_attempts_active_idx ON qinglong.run_attempts (lease_expires_at_ms, id)
    WHERE status IN ('claimed', 'starting', 'running');
CREATE INDEX runs_status_idx ON qinglong.runs (status, queued_at_ms, id);
CREATE INDEX runs_task_idx ON qinglong.runs (project_id, task_id, created_at_ms);

ALTER TABLE qinglong.task_definitions ADD COLUMN deleted_at_ms bigint;
ALTER TABLE qinglong.triggers ADD COLUMN deleted_at_ms bigint;

CREATE TABLE qinglong.instances (
    instance_id   varchar(128) PRIMARY KEY,
    role          varchar(16)  NOT NULL CHECK (role IN ('serve', 'control', 'worker', 'web')),
    host          varchar(255) NOT NULL,
    pid           integer      NOT NULL,
    started_at_ms bigint       NOT NULL,
    seen_at_ms    bigint       NOT NULL,
    stopped_at_ms bigint
);

-- When each project was archived and restored (the audit's evidence: nothing fires meanwhile).
CREATE TABLE qinglong.project_archivals (
    project_id     varchar(128) NOT NULL REFERENCES qinglong.projects (id),
    archived_at_ms bigint       NOT NULL,
    restored_at_ms bigint       CHECK (restored_at_ms >= archived_at_ms),
    PRIMARY KEY (project_id, archived_at_ms)
);
INSERT INTO qinglong.project_archivals (project_id, archived_at_ms, restored_at_ms)
SELECT id, updated_at_ms, NULL FROM qinglong.projects WHERE status = 'archived';

REVOKE ALL ON qinglong.instances, qinglong.project_archivals FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON qinglong.project_archivals TO ql_admin;
GRANT SELECT ON qinglong.project_archivals TO ql_runtime;
GRANT SELECT, INSERT, UPDATE ON qinglong.instances TO ql_runtime;
GRANT SELECT ON qinglong.instances TO ql_admin;

DO $$
BEGIN
    UPDATE qinglong.schema_capabilities
       SET contract_version = 3, migration_id = '0003_lifecycle',
           capabilities = '["definitions", "run_core", "cluster_scheduler_admission", "role_grants", "attempt_leases"]',
           updated_at_ms = (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint
     WHERE contract_name = 'qinglong-control' AND contract_version = 2
       AND migration_id = '0002_role_grants';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'capability row is not at version 2' USING ERRCODE = 'check_violation';
    END IF;
END $$;
