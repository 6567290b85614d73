-- Accounts of the HTTP API and the panel (`ql web`, as the role ql_web): local users (argon2
-- password hashes), browser sessions and API tokens (only SHA-256 digests of their secrets are
-- kept), failed logins (the rate limit reads them) and the audit log of what the API's writes
-- did and who asked. ql_web gets exactly what the API needs: it publishes like ql_admin, admits
-- run-now Runs and cancels like ql_runtime, reads Runs, logs and the ledger, and owns nothing.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ql_web' AND rolcanlogin
                   AND NOT (rolsuper OR rolcreatedb OR rolcreaterole OR rolreplication
                            OR rolbypassrls)) THEN
        RAISE EXCEPTION 'role ql_web must exist, log in, and have no superuser, createdb, '
                        'createrole, replication or bypassrls attribute'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member
               WHERE r.rolname = 'ql_web') THEN
        RAISE EXCEPTION 'role ql_web must not be a member of other roles'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END $$;

CREATE TABLE qinglong.users (
    username       varchar(64)  PRIMARY KEY CHECK (username ~ '^[a-z0-9][a-z0-9._@-]{0,63}$'),
    role           varchar(16)  NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    password_hash  varchar(512) NOT NULL CHECK (length(password_hash) >= 1),
    created_at_ms  bigint       NOT NULL CHECK (created_at_ms >= 0),
    updated_at_ms  bigint       NOT NULL CHECK (updated_at_ms >= created_at_ms),
    disabled_at_ms bigint
);

CREATE TABLE qinglong.user_sessions (
    id_digest          char(64)     PRIMARY KEY,
    username           varchar(64)  NOT NULL REFERENCES qinglong.users (username),
    created_at_ms      bigint       NOT NULL CHECK (created_at_ms >= 0),
    expires_at_ms      bigint       NOT NULL CHECK (expires_at_ms > created_at_ms),
    idle_expires_at_ms bigint       NOT NULL CHECK (idle_expires_at_ms > created_at_ms),
    seen_at_ms         bigint       NOT NULL CHECK (seen_at_ms >= created_at_ms),
    ended_at_ms        bigint,
    client             varchar(255)
);
CREATE INDEX user_sessions_user_idx ON qinglong.user_sessions (username, created_at_ms);

CREATE TABLE qinglong.api_tokens (
    id              varchar(32)  PRIMARY KEY CHECK (length(id) >= 8),
    username        varchar(64)  NOT NULL REFERENCES qinglong.users (username),
    name            varchar(128) NOT NULL CHECK (length(name) >= 1),
    scope           varchar(16)  NOT NULL CHECK (scope IN ('read', 'operate', 'admin')),
    secret_digest   char(64)     NOT NULL,
    created_at_ms   bigint       NOT NULL CHECK (created_at_ms >= 0),
    expires_at_ms   bigint       CHECK (expires_at_ms IS NULL OR expires_at_ms > created_at_ms),
    last_used_at_ms bigint,
    revoked_at_ms   bigint,
    revoked_by      varchar(64),
    CHECK ((revoked_at_ms IS NULL) = (revoked_by IS NULL))
);
CREATE INDEX api_tokens_user_idx ON qinglong.api_tokens (username, created_at_ms);

CREATE TABLE qinglong.login_failures (
    id      uuid         PRIMARY KEY,
    subject varchar(300) NOT NULL CHECK (length(subject) >= 1),
    at_ms   bigint       NOT NULL CHECK (at_ms >= 0)
);
CREATE INDEX login_failures_subject_idx ON qinglong.login_failures (subject, at_ms);
CREATE INDEX login_failures_at_idx ON qinglong.login_failures (at_ms);

CREATE TABLE qinglong.audit_log (
    id         bigint       GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at_ms      bigint       NOT NULL CHECK (at_ms >= 0),
    actor      varchar(64)  NOT NULL CHECK (length(actor) >= 1),
    via        varchar(16)  NOT NULL CHECK (via IN ('session', 'token', 'cli')),
    token_id   varchar(32),
    action     varchar(64)  NOT NULL CHECK (length(action) >= 1),
    project_id varchar(128),
    target     varchar(300),
    detail     jsonb        NOT NULL CHECK (jsonb_typeof(detail) = 'object'),
    client     varchar(255)
);
CREATE INDEX audit_log_at_idx ON qinglong.audit_log (at_ms, id);

REVOKE ALL ON qinglong.users, qinglong.user_sessions, qinglong.api_tokens,
    qinglong.login_failures, qinglong.audit_log FROM PUBLIC;
GRANT USAGE ON SCHEMA qinglong TO ql_web;
GRANT SELECT ON qinglong.schema_migrations, qinglong.schema_capabilities TO ql_web;
-- publishing, as ql_admin does it
GRANT SELECT, INSERT, UPDATE ON qinglong.projects, qinglong.task_definitions, qinglong.triggers,
    qinglong.trigger_schedules, qinglong.project_archivals, qinglong.trigger_pauses TO ql_web;
GRANT SELECT, INSERT ON qinglong.task_definition_revisions, qinglong.task_execution_revisions,
    qinglong.trigger_revisions TO ql_web;
-- run now and cancel, as ql_runtime does them; Runs, logs, the ledger and the processes, read
GRANT SELECT, INSERT, UPDATE ON qinglong.runs, qinglong.run_attempts, qinglong.instances
    TO ql_web;
GRANT SELECT, INSERT ON qinglong.run_events TO ql_web;
GRANT SELECT ON qinglong.run_log_chunks, qinglong.trigger_schedule_misfires TO ql_web;
-- the accounts
GRANT SELECT, INSERT, UPDATE ON qinglong.users, qinglong.user_sessions, qinglong.api_tokens
    TO ql_web;
GRANT SELECT, INSERT, DELETE ON qinglong.login_failures TO ql_web;
GRANT SELECT, INSERT ON qinglong.audit_log TO ql_web;

DO $$
BEGIN
    UPDATE qinglong.schema_capabilities
       SET contract_version = contract_version + 1, migration_id = '0008_accounts',
           capabilities = capabilities || '["accounts"]'::jsonb,
           updated_at_ms = (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint
     WHERE contract_name = 'qinglong-control' AND NOT capabilities ? 'accounts';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'capability row is missing or already has accounts'
            USING ERRCODE = 'check_violation';
    END IF;
END $$;
