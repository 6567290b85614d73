-- name: oidc_pending_insert
-- A login in progress, until its callback takes it or it expires.
INSERT INTO oidc_pending_logins (state_digest, issuer, verifier, nonce, redirect_uri,
    next_path, created_at_ms, expires_at_ms)
VALUES (:state_digest, :issuer, :verifier, :nonce, :redirect_uri,
        :next_path, :now_ms, :now_ms + :lifetime_ms);

-- name: oidc_pending_take
-- The login in progress of this state, taken once: deleted whether or not it has expired.
DELETE FROM oidc_pending_logins WHERE state_digest = :state_digest
RETURNING state_digest, issuer, verifier, nonce, redirect_uri, next_path, created_at_ms,
          expires_at_ms;

-- name: oidc_pending_prune
-- Forget logins in progress that expired (a few at a time, as new ones start).
DELETE FROM oidc_pending_logins WHERE state_digest IN (
    SELECT state_digest FROM oidc_pending_logins WHERE expires_at_ms <= :now_ms
    ORDER BY expires_at_ms LIMIT 100);

-- name: oidc_identity_by_subject
-- The user an identity of the issuer is linked to.
SELECT issuer, subject, username, linked_at_ms, last_login_at_ms FROM oidc_identities
WHERE issuer = :issuer AND subject = :subject;

-- name: oidc_identity_by_user
-- The identity of the issuer a user is linked to.
SELECT issuer, subject, username, linked_at_ms, last_login_at_ms FROM oidc_identities
WHERE issuer = :issuer AND username = :username;

-- name: oidc_identity_insert
-- Link an identity to a user at its first login.
INSERT INTO oidc_identities (issuer, subject, username, linked_at_ms, last_login_at_ms)
VALUES (:issuer, :subject, :username, :now_ms, :now_ms);

-- name: oidc_identity_seen
-- A later login of a linked identity.
UPDATE oidc_identities SET last_login_at_ms = :now_ms
WHERE issuer = :issuer AND subject = :subject;
