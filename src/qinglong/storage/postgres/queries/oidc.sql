-- name: oidc_pending_insert
-- A login in progress, until its callback takes it or it expires.
INSERT INTO qinglong.oidc_pending_logins (state_digest, issuer, verifier, nonce, redirect_uri,
    next_path, created_at_ms, expires_at_ms)
VALUES (%(state_digest)s, %(issuer)s, %(verifier)s, %(nonce)s, %(redirect_uri)s,
        %(next_path)s, %(now_ms)s, %(now_ms)s + %(lifetime_ms)s);

-- name: oidc_pending_take
-- The login in progress of this state, taken once: deleted whether or not it has expired.
DELETE FROM qinglong.oidc_pending_logins WHERE state_digest = %(state_digest)s
RETURNING state_digest, issuer, verifier, nonce, redirect_uri, next_path, created_at_ms,
          expires_at_ms;

-- name: oidc_pending_prune
-- Forget logins in progress that expired (a few at a time, as new ones start).
DELETE FROM qinglong.oidc_pending_logins WHERE state_digest IN (
    SELECT state_digest FROM qinglong.oidc_pending_logins WHERE expires_at_ms <= %(now_ms)s
    ORDER BY expires_at_ms LIMIT 100);

-- name: oidc_identity_by_subject
-- The user an identity of the issuer is linked to.
SELECT issuer, subject, username, linked_at_ms, last_login_at_ms FROM qinglong.oidc_identities
WHERE issuer = %(issuer)s AND subject = %(subject)s;

-- name: oidc_identity_by_user
-- The identity of the issuer a user is linked to.
SELECT issuer, subject, username, linked_at_ms, last_login_at_ms FROM qinglong.oidc_identities
WHERE issuer = %(issuer)s AND username = %(username)s;

-- name: oidc_identity_insert
-- Link an identity to a user at its first login.
INSERT INTO qinglong.oidc_identities (issuer, subject, username, linked_at_ms, last_login_at_ms)
VALUES (%(issuer)s, %(subject)s, %(username)s, %(now_ms)s, %(now_ms)s);

-- name: oidc_identity_seen
-- A later login of a linked identity.
UPDATE qinglong.oidc_identities SET last_login_at_ms = %(now_ms)s
WHERE issuer = %(issuer)s AND subject = %(subject)s;
