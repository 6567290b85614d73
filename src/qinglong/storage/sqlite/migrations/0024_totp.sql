-- The second factor of password logins (issue 23, item 4; docs/security.md#second-factor;
-- PostgreSQL's migration 0025 has the reasoning): a user's TOTP secret, sealed with the
-- project keyring, pending until confirmed with a code; the last time step used (a code is
-- good once); and the recovery codes, as SHA-256 digests, each usable once.
CREATE TABLE user_second_factors (
    username      TEXT    NOT NULL PRIMARY KEY REFERENCES users (username),
    key_id        TEXT    NOT NULL CHECK (length(key_id) = 16),
    sealed        TEXT    NOT NULL CHECK (length(sealed) BETWEEN 1 AND 512),
    last_step     INTEGER NOT NULL CHECK (last_step >= -1),
    created_at_ms INTEGER NOT NULL CHECK (created_at_ms >= 0),
    enabled_at_ms INTEGER CHECK (enabled_at_ms IS NULL OR enabled_at_ms >= created_at_ms)
) STRICT;

CREATE TABLE user_recovery_codes (
    username    TEXT    NOT NULL REFERENCES user_second_factors (username) ON DELETE CASCADE,
    code_digest TEXT    NOT NULL CHECK (length(code_digest) = 64),
    used_at_ms  INTEGER,
    PRIMARY KEY (username, code_digest)
) STRICT;
