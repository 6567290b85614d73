-- name: account_user_insert
-- A new user.
INSERT INTO users (username, role, all_projects, password_hash, created_at_ms, updated_at_ms,
                   disabled_at_ms)
VALUES (:username, CASE WHEN :role = 'none' THEN 'viewer' ELSE :role END, :role <> 'none',
        :password_hash, :now_ms, :now_ms, NULL);

-- name: account_user_get
-- One user by name, with their second factor's state (off, pending, on).
SELECT u.*, CASE WHEN f.username IS NULL THEN 'off' WHEN f.enabled_at_ms IS NULL THEN 'pending'
            ELSE 'on' END AS second_factor
  FROM users u LEFT JOIN user_second_factors f ON f.username = u.username
 WHERE u.username = :username;

-- name: account_user_list
-- Every user, by name, with their second factor's state (one statement for the list).
SELECT u.*, CASE WHEN f.username IS NULL THEN 'off' WHEN f.enabled_at_ms IS NULL THEN 'pending'
            ELSE 'on' END AS second_factor
  FROM users u LEFT JOIN user_second_factors f ON f.username = u.username
 ORDER BY u.username;

-- name: account_user_update
-- Change a user's role, password or disabled state (NULL keeps each).
UPDATE users
   SET role = CASE WHEN :role = 'none' THEN 'viewer' ELSE coalesce(:role, role) END,
       all_projects = coalesce(:role <> 'none', all_projects),
       password_hash = coalesce(:password_hash, password_hash),
       disabled_at_ms = CASE WHEN :disabled IS NULL THEN disabled_at_ms
                             WHEN :disabled THEN coalesce(disabled_at_ms, :now_ms)
                             ELSE NULL END,
       updated_at_ms = max(updated_at_ms, :now_ms)
 WHERE username = :username;

-- name: account_sessions_end_for_user
-- End every open session of a user (disabled, or a new password).
UPDATE user_sessions SET ended_at_ms = :now_ms
 WHERE username = :username AND ended_at_ms IS NULL;

-- name: account_session_insert
-- A new browser session.
INSERT INTO user_sessions (id_digest, username, created_at_ms, expires_at_ms, idle_expires_at_ms,
                           seen_at_ms, ended_at_ms, client, method)
VALUES (:id_digest, :username, :now_ms, :now_ms + :lifetime_ms,
        min(:now_ms + :idle_ms, :now_ms + :lifetime_ms), :now_ms, NULL, :client, :method);

-- name: account_session_get
-- A session that still holds (not ended, not expired, its user enabled), with the user's role
-- and how it was made (password or sso).
SELECT s.id_digest, s.username, CASE WHEN u.all_projects THEN u.role ELSE 'none' END AS role, s.created_at_ms, s.expires_at_ms,
       s.idle_expires_at_ms, s.seen_at_ms, s.method
  FROM user_sessions s JOIN users u ON u.username = s.username
 WHERE s.id_digest = :id_digest AND s.ended_at_ms IS NULL AND u.disabled_at_ms IS NULL
   AND s.expires_at_ms > :now_ms AND s.idle_expires_at_ms > :now_ms;

-- name: account_session_touch
-- Seen now: the idle expiry moves on (never past the absolute one).
UPDATE user_sessions
   SET seen_at_ms = :now_ms,
       idle_expires_at_ms = max(idle_expires_at_ms, min(:now_ms + :idle_ms, expires_at_ms))
 WHERE id_digest = :id_digest AND ended_at_ms IS NULL;

-- name: account_session_end
-- Log out.
UPDATE user_sessions SET ended_at_ms = :now_ms WHERE id_digest = :id_digest AND ended_at_ms IS NULL;

-- name: account_token_insert
-- A new API token (its secret's digest only).
INSERT INTO api_tokens (id, username, name, scope, secret_digest, created_at_ms, expires_at_ms,
                        last_used_at_ms, revoked_at_ms, revoked_by, projects)
VALUES (:id, :username, :name, :scope, :secret_digest, :now_ms,
        CASE WHEN :lifetime_ms IS NULL THEN NULL ELSE :now_ms + :lifetime_ms END,
        NULL, NULL, NULL, :projects);

-- name: account_token_get
-- One token by its public id, with its user's role and state.
SELECT t.*, CASE WHEN u.all_projects THEN u.role ELSE 'none' END AS role, u.disabled_at_ms AS user_disabled_at_ms
  FROM api_tokens t JOIN users u ON u.username = t.username
 WHERE t.id = :id;

-- name: account_token_list
-- Tokens of one user (or of all when username is NULL), newest first.
SELECT t.*, CASE WHEN u.all_projects THEN u.role ELSE 'none' END AS role, u.disabled_at_ms AS user_disabled_at_ms
  FROM api_tokens t JOIN users u ON u.username = t.username
 WHERE :username IS NULL OR t.username = :username
 ORDER BY t.created_at_ms DESC, t.id;

-- name: account_token_used
-- Record a use (at most once per touch interval).
UPDATE api_tokens SET last_used_at_ms = :now_ms
 WHERE id = :id AND (last_used_at_ms IS NULL OR last_used_at_ms <= :now_ms - :touch_after_ms);

-- name: account_token_revoke
-- Revoke a token (a revoked one keeps its first revocation).
UPDATE api_tokens SET revoked_at_ms = :now_ms, revoked_by = :by
 WHERE id = :id AND revoked_at_ms IS NULL;

-- name: account_login_lock
-- Nothing to take: the write transaction (BEGIN IMMEDIATE) already serializes the attempts,
-- so the count that admits an attempt and the failure it records are one step.
SELECT :subject AS locked;

-- name: account_login_failure_count
-- Failed logins of one subject since a time, and the oldest of them.
SELECT count(*) AS n, min(at_ms) AS oldest_ms FROM login_failures
 WHERE subject = :subject AND at_ms > :since_ms;

-- name: account_login_failure_insert
-- One failed login (recorded before the password is checked; deleted again on success).
INSERT INTO login_failures (id, subject, at_ms) VALUES (:id, :subject, :now_ms);

-- name: account_login_failure_delete
-- Take back one recorded attempt (the password was right, or it was never checked).
DELETE FROM login_failures WHERE id = :id;

-- name: account_login_prune_lock
-- Always held: the write transaction is the only writer.
SELECT 1 AS held;

-- name: account_login_failures_prune
-- Forget failures older than the longest window.
DELETE FROM login_failures WHERE at_ms < :before_ms;

-- name: account_login_failures_clear
-- A successful login clears the failures of the subject that limited it.
DELETE FROM login_failures WHERE subject = :subject;

-- name: account_device_insert
-- A device that logged in as a user (its cookie's digest only).
INSERT INTO login_devices (id_digest, username, created_at_ms, expires_at_ms)
VALUES (:id_digest, :username, :now_ms, :now_ms + :lifetime_ms);

-- name: account_device_get
-- A device of a user that has not expired.
SELECT id_digest, username, created_at_ms, expires_at_ms FROM login_devices
 WHERE id_digest = :id_digest AND username = :username AND expires_at_ms > :now_ms;

-- name: account_devices_trim
-- Keep a user's newest devices only, and forget expired ones.
DELETE FROM login_devices
 WHERE (username = :username AND id_digest NOT IN (
            SELECT id_digest FROM login_devices WHERE username = :username
             ORDER BY created_at_ms DESC, id_digest LIMIT :keep))
    OR expires_at_ms <= :now_ms;

-- name: account_devices_end_for_user
-- Forget every device of a user (a new password, or disabled).
DELETE FROM login_devices WHERE username = :username;

-- name: account_tokens_revoke_for_user
-- Revoke every token of a user that is not revoked yet (a new password, or disabled).
UPDATE api_tokens SET revoked_at_ms = :now_ms, revoked_by = :by
 WHERE username = :username AND revoked_at_ms IS NULL;

-- name: account_user_rehash
-- Replace a password hash by a stronger hash of the same password (only if unchanged).
UPDATE users SET password_hash = :new_hash
 WHERE username = :username AND password_hash = :old_hash;

-- name: account_audit_insert
-- One audit entry; its id.
INSERT INTO audit_log (at_ms, actor, via, token_id, action, project_id, target, detail, client)
VALUES (:now_ms, :actor, :via, :token_id, :action, :project_id, :target, :detail, :client)
RETURNING id;

-- name: account_audit_list
-- Audit entries, newest first, before an id when given; of one actor, one action (or an action
-- under it: 'notify' keeps 'notify.test'), one project and at_ms in [since_ms, until_ms) when
-- given.
SELECT * FROM audit_log
 WHERE (:before_id IS NULL OR id < :before_id)
   AND (:actor IS NULL OR actor = :actor)
   AND (:action IS NULL OR action = :action
        OR substr(action, 1, length(:action) + 1) = :action || '.')
   AND (:project_id IS NULL OR project_id = :project_id)
   AND (:since_ms IS NULL OR at_ms >= :since_ms)
   AND (:until_ms IS NULL OR at_ms < :until_ms)
 ORDER BY id DESC LIMIT :limit;

-- name: account_grants_of_user
-- The projects a user is granted a role on (per-project roles, 0024_grants), by project.
SELECT project_id, role FROM user_grants WHERE username = :username ORDER BY project_id;

-- name: account_grants_on_project
-- Who is granted a role on one project, by name.
SELECT username, project_id, role, granted_by, granted_at_ms
  FROM user_grants WHERE project_id = :project_id ORDER BY username;

-- name: account_grant_get
-- One grant.
SELECT username, project_id, role, granted_by, granted_at_ms
  FROM user_grants WHERE username = :username AND project_id = :project_id;

-- name: account_grant_put
-- Grant a role on a project (replacing the one held).
INSERT INTO user_grants (username, project_id, role, granted_by, granted_at_ms)
VALUES (:username, :project_id, :role, :by, :now_ms)
ON CONFLICT (username, project_id) DO UPDATE
   SET role = excluded.role, granted_by = excluded.granted_by,
       granted_at_ms = excluded.granted_at_ms;

-- name: account_grant_delete
-- Take a grant back.
DELETE FROM user_grants WHERE username = :username AND project_id = :project_id;
