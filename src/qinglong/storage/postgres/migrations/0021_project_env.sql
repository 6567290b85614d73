-- Project environments and secrets (issue 22, docs/controls/environments.md).
--
-- project_env_revisions: every change of a project's environment, immutable (who, what kind
-- of change, never a value); the latest is the environment. Its digest covers each entry's
-- name, enabled flag and value digest. project_env_entries: every entry of every revision (a
-- change copies the others). A plain value is kept as it is; a secret as an AES-256-GCM seal
-- (base64) with the id of the key that sealed it: `ql secret rotate-key` seals them again
-- under a new key (the one UPDATE these rows ever see: the content and digests stay).
-- secret_keyring: the key the secrets are sealed under now (its id), and the database's
-- digest key (sealed under it) that keys the secret values' HMAC digests.
CREATE TABLE qinglong.project_env_revisions (
    project_id    varchar(128)  NOT NULL REFERENCES qinglong.projects (id),
    revision      integer       NOT NULL CHECK (revision >= 1),
    digest        char(64)      NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
    change        jsonb         NOT NULL CHECK (jsonb_typeof(change) = 'object'),
    created_by    varchar(128)  NOT NULL CHECK (length(created_by) >= 1),
    created_at_ms bigint        NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (project_id, revision)
);

CREATE TABLE qinglong.project_env_entries (
    project_id   varchar(128)  NOT NULL,
    revision     integer       NOT NULL,
    name         varchar(128)  NOT NULL CHECK (name ~ '^[A-Za-z_][A-Za-z0-9_]*$'),
    enabled      boolean       NOT NULL,
    secret       boolean       NOT NULL,
    description  varchar(1024) NOT NULL,
    value_digest varchar(80)   NOT NULL,
    value        text,
    sealed       text,
    key_id       varchar(16),
    PRIMARY KEY (project_id, revision, name),
    FOREIGN KEY (project_id, revision) REFERENCES qinglong.project_env_revisions (project_id, revision),
    CHECK (CASE WHEN secret THEN value IS NULL AND sealed IS NOT NULL AND key_id IS NOT NULL
                ELSE value IS NOT NULL AND sealed IS NULL AND key_id IS NULL END)
);

CREATE TABLE qinglong.secret_keyring (
    id            smallint    PRIMARY KEY CHECK (id = 1),
    key_id        varchar(16) NOT NULL,
    digest_key    text        NOT NULL,
    updated_at_ms bigint      NOT NULL CHECK (updated_at_ms >= 0)
);

-- the key and digest an Attempt's environment was leased with (never a value)
ALTER TABLE qinglong.run_attempts ADD COLUMN IF NOT EXISTS environment_revision integer;
ALTER TABLE qinglong.run_attempts ADD COLUMN IF NOT EXISTS environment_digest char(64);

REVOKE ALL ON qinglong.project_env_revisions, qinglong.project_env_entries,
    qinglong.secret_keyring FROM PUBLIC;
GRANT SELECT, INSERT ON qinglong.project_env_revisions TO ql_admin, ql_web;
GRANT SELECT, INSERT, UPDATE ON qinglong.project_env_entries, qinglong.secret_keyring
    TO ql_admin, ql_web;
-- a worker reads the environment it injects (and opens the seals with its own key); so does
-- ql_runtime, which may lease Runs as a worker does (it reads every task's plan already)
GRANT SELECT ON qinglong.project_env_revisions, qinglong.project_env_entries
    TO ql_worker, ql_runtime;
-- `ql env` and `ql secret` record their changes in the audit log, as ql_admin
GRANT INSERT ON qinglong.audit_log TO ql_admin;
