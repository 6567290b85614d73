-- Login devices (docs/security.md#login-rate-limiting): a browser that logged in as a user
-- gets a random device cookie; only the SHA-256 digest of its secret is kept here. A login
-- that presents a device cookie of the user it names is limited per device, not per user
-- name, so an attacker who keeps failing for that name does not lock the real user out.
-- A new password or disabling the user deletes the user's devices (and revokes the user's
-- tokens, in the same transaction).
CREATE TABLE login_devices (
    id_digest     TEXT    NOT NULL PRIMARY KEY CHECK (length(id_digest) = 64),
    username      TEXT    NOT NULL REFERENCES users (username),
    created_at_ms INTEGER NOT NULL CHECK (created_at_ms >= 0),
    expires_at_ms INTEGER NOT NULL CHECK (expires_at_ms > created_at_ms)
) STRICT;
CREATE INDEX login_devices_user_idx ON login_devices (username, created_at_ms);
CREATE INDEX login_devices_expires_idx ON login_devices (expires_at_ms);
