-- name: ledger_create
-- The migration ledger; created by the runner before the first migration.
CREATE TABLE IF NOT EXISTS schema_migrations (
    migration_id  TEXT    NOT NULL PRIMARY KEY,
    stream_id     TEXT    NOT NULL CHECK (stream_id = 'sqlite-main'),
    dialect       TEXT    NOT NULL CHECK (dialect = 'sqlite'),
    checksum      TEXT    NOT NULL CHECK (length(checksum) = 64),
    applied_at_ms INTEGER NOT NULL CHECK (applied_at_ms >= 0)
) STRICT;

-- name: ledger_exists
-- Whether the ledger table exists at all.
SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations';

-- name: ledger_list
-- Applied migrations in order.
SELECT migration_id, stream_id, dialect, checksum, applied_at_ms
FROM schema_migrations ORDER BY migration_id;

-- name: ledger_insert
-- Record one applied migration.
INSERT INTO schema_migrations (migration_id, stream_id, dialect, checksum, applied_at_ms)
VALUES (:migration_id, 'sqlite-main', 'sqlite', :checksum, :applied_at_ms);

-- name: user_tables
-- The tables in the file that are not SQLite's own.
SELECT name FROM sqlite_master
WHERE type = 'table' AND name NOT LIKE 'sqlite%' ORDER BY name;

-- name: ping
-- One round trip to the database (readiness).
SELECT 1 AS ok;
