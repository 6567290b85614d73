-- name: ledger_bootstrap
-- Create the schema and the migration ledger before the first migration runs.
CREATE SCHEMA IF NOT EXISTS qinglong;
CREATE TABLE IF NOT EXISTS qinglong.schema_migrations (
    migration_id  varchar(128) PRIMARY KEY,
    stream_id     varchar(64)  NOT NULL CHECK (stream_id = 'postgresql-main'),
    dialect       varchar(16)  NOT NULL CHECK (dialect = 'postgresql'),
    checksum      char(64)     NOT NULL CHECK (checksum ~ '^[0-9a-f]{64}$'),
    applied_at_ms bigint       NOT NULL CHECK (applied_at_ms >= 0)
);

-- name: ledger_exists
-- Whether the ledger table exists (readers must not create it).
SELECT to_regclass('qinglong.schema_migrations') IS NOT NULL AS present;

-- name: ledger_list
-- Applied migrations in order.
SELECT migration_id, stream_id, dialect, checksum, applied_at_ms
FROM qinglong.schema_migrations ORDER BY migration_id;

-- name: ledger_insert
-- Record one applied migration, stamped with database time.
INSERT INTO qinglong.schema_migrations (migration_id, stream_id, dialect, checksum, applied_at_ms)
VALUES (%(migration_id)s, 'postgresql-main', 'postgresql', %(checksum)s,
        (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint);

-- name: migration_try_lock
-- The runner's transaction-scoped advisory lock; false when another runner holds it.
SELECT pg_try_advisory_xact_lock(20812, 768) AS locked;

-- name: migration_timeouts
-- Bounded waits for DDL.
SELECT set_config('statement_timeout', '15s', true), set_config('lock_timeout', '5s', true);

-- name: capability_get
-- The capability row.
SELECT contract_name, contract_version, migration_id, capabilities
FROM qinglong.schema_capabilities ORDER BY contract_name;

-- name: server_facts
-- What readiness needs to know about the server and this session.
SELECT current_setting('server_version_num')::integer AS version_num,
       pg_is_in_recovery() AS in_recovery,
       current_setting('transaction_read_only') AS transaction_read_only,
       current_setting('default_transaction_read_only') AS default_read_only,
       current_user AS role_name,
       current_database() AS database_name,
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS is_superuser;

-- name: role_attributes
-- Attributes of the named roles.
SELECT rolname, rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls
FROM pg_roles WHERE rolname = ANY(%(roles)s) ORDER BY rolname;

-- name: schema_tables
-- Tables of the qinglong schema with their owners.
SELECT c.relname AS table_name, pg_get_userbyid(c.relowner) AS owner
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'qinglong' AND c.relkind IN ('r', 'p', 'v', 'm')
ORDER BY c.relname;

-- name: table_privileges
-- Effective privileges of one role on every relation of the schema (column grants count;
-- views, materialized views and foreign tables too; MAINTAIN from PostgreSQL 17).
SELECT c.relname AS table_name,
       has_any_column_privilege(%(role)s, c.oid, 'SELECT') AS can_select,
       has_any_column_privilege(%(role)s, c.oid, 'INSERT') AS can_insert,
       has_any_column_privilege(%(role)s, c.oid, 'UPDATE') AS can_update,
       has_table_privilege(%(role)s, c.oid, 'DELETE') AS can_delete,
       has_table_privilege(%(role)s, c.oid, 'TRUNCATE') AS can_truncate,
       has_any_column_privilege(%(role)s, c.oid, 'REFERENCES') AS can_references,
       has_table_privilege(%(role)s, c.oid, 'TRIGGER') AS can_trigger,
       CASE WHEN current_setting('server_version_num')::integer >= 170000
            THEN has_table_privilege(%(role)s, c.oid, 'MAINTAIN') ELSE false END AS can_maintain
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'qinglong' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
ORDER BY c.relname;

-- name: schema_privileges
-- Schema and database privileges of one role.
SELECT has_schema_privilege(%(role)s, 'qinglong', 'USAGE') AS can_use,
       has_schema_privilege(%(role)s, 'qinglong', 'CREATE') AS can_create,
       has_database_privilege(%(role)s, current_database(), 'CONNECT') AS can_connect,
       has_database_privilege(%(role)s, current_database(), 'CREATE') AS can_create_in_database,
       has_database_privilege(%(role)s, current_database(), 'TEMPORARY') AS can_temp,
       coalesce(has_table_privilege(%(role)s, (
           SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'qinglong' AND c.relname = 'schema_migrations'), 'SELECT'),
           false) AS can_read_ledger,
       coalesce(has_table_privilege(%(role)s, (
           SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'qinglong' AND c.relname = 'schema_capabilities'), 'SELECT'),
           false) AS can_read_capabilities;

-- name: schema_exists
-- Whether the qinglong schema exists at all (readable without USAGE on it).
SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'qinglong') AS present;

-- name: role_memberships
-- Roles the named role is a member of (directly or not); none is allowed.
SELECT b.rolname AS parent
FROM pg_roles r JOIN pg_roles b ON pg_has_role(r.oid, b.oid, 'MEMBER') AND b.oid <> r.oid
WHERE r.rolname = %(role)s
ORDER BY b.rolname;

-- name: session_timeouts
-- The timeouts in force for this session.
SELECT current_setting('idle_in_transaction_session_timeout') AS idle_in_transaction,
       current_setting('statement_timeout') AS statement_timeout,
       coalesce(current_setting('transaction_timeout', true), '') AS transaction_timeout;

-- name: now_ms
-- One reading of the database clock in epoch milliseconds.
SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms;

-- name: wake
-- A wake-up sent inside a transaction (storage/wakeups.py): delivered only if it commits.
SELECT pg_notify(%(channel)s, %(payload)s);

-- name: serializable_session
-- Index scans only in this transaction: a sequential scan under SERIALIZABLE predicate-locks
-- a whole table (see prepare_session, which long-lived sessions set for good).
SELECT set_config('enable_seqscan', 'off', true) AS seqscan;

-- name: ping
-- One round trip to the database (readiness).
SELECT 1 AS ok;
