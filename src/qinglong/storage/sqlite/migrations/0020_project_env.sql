-- Project environments and secrets (issue 22, docs/controls/environments.md; PostgreSQL's
-- migration 0021 has the reasoning): every change an immutable revision, every entry of every
-- revision (plain values as they are, secrets sealed with their key's id), the keyring, and
-- the environment revision each Attempt was leased with.
CREATE TABLE project_env_revisions (
    project_id    TEXT    NOT NULL REFERENCES projects (id),
    revision      INTEGER NOT NULL CHECK (revision >= 1),
    digest        TEXT    NOT NULL CHECK (length(digest) = 64),
    change        TEXT    NOT NULL CHECK (json_valid(change)),
    created_by    TEXT    NOT NULL CHECK (length(created_by) BETWEEN 1 AND 128),
    created_at_ms INTEGER NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (project_id, revision)
) STRICT;

CREATE TABLE project_env_entries (
    project_id   TEXT    NOT NULL,
    revision     INTEGER NOT NULL,
    name         TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
    enabled      INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    secret       INTEGER NOT NULL CHECK (secret IN (0, 1)),
    description  TEXT    NOT NULL CHECK (length(description) <= 1024),
    value_digest TEXT    NOT NULL CHECK (length(value_digest) <= 80),
    value        TEXT,
    sealed       TEXT,
    key_id       TEXT    CHECK (key_id IS NULL OR length(key_id) = 16),
    PRIMARY KEY (project_id, revision, name),
    FOREIGN KEY (project_id, revision) REFERENCES project_env_revisions (project_id, revision),
    CHECK (CASE WHEN secret THEN value IS NULL AND sealed IS NOT NULL AND key_id IS NOT NULL
                ELSE value IS NOT NULL AND sealed IS NULL AND key_id IS NULL END)
) STRICT;

CREATE TABLE secret_keyring (
    id            INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    key_id        TEXT    NOT NULL CHECK (length(key_id) = 16),
    digest_key    TEXT    NOT NULL,
    updated_at_ms INTEGER NOT NULL CHECK (updated_at_ms >= 0)
) STRICT;

ALTER TABLE run_attempts ADD COLUMN environment_revision INTEGER;
ALTER TABLE run_attempts ADD COLUMN environment_digest TEXT;
