-- Accounts of the HTTP API and the panel: local users (argon2 password hashes), browser
-- sessions and API tokens (only SHA-256 digests of their secrets are kept), failed logins
-- (the rate limit reads them) and the audit log of what the API's writes did and who asked.
CREATE TABLE users (
    username       TEXT    NOT NULL PRIMARY KEY CHECK (length(username) BETWEEN 1 AND 64),
    role           TEXT    NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    password_hash  TEXT    NOT NULL CHECK (length(password_hash) BETWEEN 1 AND 512),
    created_at_ms  INTEGER NOT NULL CHECK (created_at_ms >= 0),
    updated_at_ms  INTEGER NOT NULL CHECK (updated_at_ms >= created_at_ms),
    disabled_at_ms INTEGER
) STRICT;

CREATE TABLE user_sessions (
    id_digest          TEXT    NOT NULL PRIMARY KEY CHECK (length(id_digest) = 64),
    username           TEXT    NOT NULL REFERENCES users (username),
    created_at_ms      INTEGER NOT NULL CHECK (created_at_ms >= 0),
    expires_at_ms      INTEGER NOT NULL CHECK (expires_at_ms > created_at_ms),
    idle_expires_at_ms INTEGER NOT NULL CHECK (idle_expires_at_ms > created_at_ms),
    seen_at_ms         INTEGER NOT NULL CHECK (seen_at_ms >= created_at_ms),
    ended_at_ms        INTEGER,
    client             TEXT    CHECK (client IS NULL OR length(client) <= 255)
) STRICT;
CREATE INDEX user_sessions_user_idx ON user_sessions (username, created_at_ms);

CREATE TABLE api_tokens (
    id              TEXT    NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 8 AND 32),
    username        TEXT    NOT NULL REFERENCES users (username),
    name            TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
    scope           TEXT    NOT NULL CHECK (scope IN ('read', 'operate', 'admin')),
    secret_digest   TEXT    NOT NULL CHECK (length(secret_digest) = 64),
    created_at_ms   INTEGER NOT NULL CHECK (created_at_ms >= 0),
    expires_at_ms   INTEGER CHECK (expires_at_ms IS NULL OR expires_at_ms > created_at_ms),
    last_used_at_ms INTEGER,
    revoked_at_ms   INTEGER,
    revoked_by      TEXT    CHECK (revoked_by IS NULL OR length(revoked_by) <= 64),
    CHECK ((revoked_at_ms IS NULL) = (revoked_by IS NULL))
) STRICT;
CREATE INDEX api_tokens_user_idx ON api_tokens (username, created_at_ms);

CREATE TABLE login_failures (
    id      TEXT    NOT NULL PRIMARY KEY CHECK (length(id) = 36),
    subject TEXT    NOT NULL CHECK (length(subject) BETWEEN 1 AND 300),
    at_ms   INTEGER NOT NULL CHECK (at_ms >= 0)
) STRICT;
CREATE INDEX login_failures_subject_idx ON login_failures (subject, at_ms);
CREATE INDEX login_failures_at_idx ON login_failures (at_ms);

CREATE TABLE audit_log (
    id         INTEGER NOT NULL PRIMARY KEY,
    at_ms      INTEGER NOT NULL CHECK (at_ms >= 0),
    actor      TEXT    NOT NULL CHECK (length(actor) BETWEEN 1 AND 64),
    via        TEXT    NOT NULL CHECK (via IN ('session', 'token', 'cli')),
    token_id   TEXT    CHECK (token_id IS NULL OR length(token_id) <= 32),
    action     TEXT    NOT NULL CHECK (length(action) BETWEEN 1 AND 64),
    project_id TEXT    CHECK (project_id IS NULL OR length(project_id) <= 128),
    target     TEXT    CHECK (target IS NULL OR length(target) <= 300),
    detail     TEXT    NOT NULL CHECK (json_valid(detail) AND length(detail) <= 16384),
    client     TEXT    CHECK (client IS NULL OR length(client) <= 255)
) STRICT;
CREATE INDEX audit_log_at_idx ON audit_log (at_ms, id);
