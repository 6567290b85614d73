-- Least-privilege grants for the four roles; the roles themselves are provisioned outside the
-- stream (`ql db migrate` does it when it connects as a superuser). Refuses unsafe roles.
DO $$
DECLARE
    wanted text[] := ARRAY['ql_migration', 'ql_admin', 'ql_runtime', 'ql_worker_ingress'];
    found integer;
BEGIN
    SELECT count(*) INTO found FROM pg_roles
     WHERE rolname = ANY (wanted) AND rolcanlogin
       AND NOT (rolsuper OR rolcreatedb OR rolcreaterole OR rolreplication OR rolbypassrls);
    IF found <> 4 THEN
        RAISE EXCEPTION 'roles % must exist, log in, and have no superuser, createdb, createrole, '
                        'replication or bypassrls attribute', wanted
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member
               WHERE r.rolname = ANY (wanted)) THEN
        RAISE EXCEPTION 'roles % must not be members of other roles', wanted
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END $$;

REVOKE ALL ON SCHEMA qinglong FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA qinglong FROM PUBLIC;
GRANT USAGE ON SCHEMA qinglong TO ql_admin, ql_runtime, ql_worker_ingress;

GRANT SELECT ON qinglong.schema_migrations, qinglong.schema_capabilities
    TO ql_admin, ql_runtime, ql_worker_ingress;

-- ql_admin publishes: projects, tasks, triggers, schedule rows (create/reset); no runs.
GRANT SELECT, INSERT, UPDATE ON qinglong.projects, qinglong.task_definitions, qinglong.triggers,
    qinglong.trigger_schedules TO ql_admin;
GRANT SELECT, INSERT ON qinglong.task_definition_revisions, qinglong.task_execution_revisions,
    qinglong.trigger_revisions TO ql_admin;

-- ql_runtime claims and admits: reads definitions, SELECT/UPDATE (never INSERT/DELETE) schedules.
GRANT SELECT ON qinglong.projects, qinglong.task_definitions, qinglong.task_definition_revisions,
    qinglong.task_execution_revisions, qinglong.triggers, qinglong.trigger_revisions TO ql_runtime;
GRANT SELECT, UPDATE ON qinglong.trigger_schedules TO ql_runtime;
GRANT SELECT, INSERT ON qinglong.trigger_schedule_claims, qinglong.trigger_schedule_misfires,
    qinglong.run_events TO ql_runtime;
GRANT SELECT, INSERT, UPDATE ON qinglong.runs, qinglong.run_attempts TO ql_runtime;

-- ql_worker_ingress: nothing on task, trigger or schedule tables.
GRANT SELECT ON qinglong.run_attempts TO ql_worker_ingress;

DO $$
BEGIN
    UPDATE qinglong.schema_capabilities
       SET contract_version = 2, migration_id = '0002_role_grants',
           capabilities = '["definitions", "run_core", "cluster_scheduler_admission", "role_grants"]',
           updated_at_ms = (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint
     WHERE contract_name = 'qinglong-control' AND contract_version = 1
       AND migration_id = '0001_core'
       AND capabilities = '["definitions", "run_core", "cluster_scheduler_admission"]';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'capability row is not at version 1' USING ERRCODE = 'check_violation';
    END IF;
END $$;
