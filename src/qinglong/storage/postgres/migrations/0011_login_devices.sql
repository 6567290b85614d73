-- Login devices (docs/security.md#login-rate-limiting): a browser that logged in as a user
-- gets a random device cookie; only the SHA-256 digest of its secret is kept here. A login
-- that presents a device cookie of the user it names is limited per device, not per user
-- name, so an attacker who keeps failing for that name does not lock the real user out.
-- A new password or disabling the user deletes the user's devices (and revokes the user's
-- tokens, in the same transaction). The capability row stays as it is.
CREATE TABLE qinglong.login_devices (
    id_digest     char(64)    PRIMARY KEY,
    username      varchar(64) NOT NULL REFERENCES qinglong.users (username),
    created_at_ms bigint      NOT NULL CHECK (created_at_ms >= 0),
    expires_at_ms bigint      NOT NULL CHECK (expires_at_ms > created_at_ms)
);
CREATE INDEX login_devices_user_idx ON qinglong.login_devices (username, created_at_ms);
CREATE INDEX login_devices_expires_idx ON qinglong.login_devices (expires_at_ms);

REVOKE ALL ON qinglong.login_devices FROM PUBLIC;
GRANT SELECT, INSERT, DELETE ON qinglong.login_devices TO ql_web;
