-- name: account_user_insert
-- A new user.
INSERT INTO qinglong.users (username, role, all_projects, password_hash, created_at_ms,
                            updated_at_ms, disabled_at_ms)
VALUES (%(username)s, CASE WHEN %(role)s = 'none' THEN 'viewer' ELSE %(role)s END,
        %(role)s <> 'none', %(password_hash)s, %(now_ms)s, %(now_ms)s, NULL);

-- name: account_user_get
-- One user by name, with their second factor's state (off, pending, on).
SELECT u.*, CASE WHEN f.username IS NULL THEN 'off' WHEN f.enabled_at_ms IS NULL THEN 'pending'
            ELSE 'on' END AS second_factor
  FROM qinglong.users u LEFT JOIN qinglong.user_second_factors f ON f.username = u.username
 WHERE u.username = %(username)s;

-- name: account_user_list
-- Every user, by name, with their second factor's state (one statement for the list).
SELECT u.*, CASE WHEN f.username IS NULL THEN 'off' WHEN f.enabled_at_ms IS NULL THEN 'pending'
            ELSE 'on' END AS second_factor
  FROM qinglong.users u LEFT JOIN qinglong.user_second_factors f ON f.username = u.username
 ORDER BY u.username;

-- name: account_user_update
-- Change a user's role, password or disabled state (NULL keeps each).
UPDATE qinglong.users
   SET role = CASE WHEN %(role)s::varchar = 'none' THEN 'viewer'
                   ELSE coalesce(%(role)s::varchar, role) END,
       all_projects = coalesce(%(role)s::varchar <> 'none', all_projects),
       password_hash = coalesce(%(password_hash)s::varchar, password_hash),
       disabled_at_ms = CASE WHEN %(disabled)s::boolean IS NULL THEN disabled_at_ms
                             WHEN %(disabled)s::boolean THEN coalesce(disabled_at_ms, %(now_ms)s)
                             ELSE NULL END,
       updated_at_ms = greatest(updated_at_ms, %(now_ms)s)
 WHERE username = %(username)s;

-- name: account_sessions_end_for_user
-- End every open session of a user (disabled, or a new password).
UPDATE qinglong.user_sessions SET ended_at_ms = %(now_ms)s
 WHERE username = %(username)s AND ended_at_ms IS NULL;

-- name: account_session_insert
-- A new browser session.
INSERT INTO qinglong.user_sessions (id_digest, username, created_at_ms, expires_at_ms,
                                    idle_expires_at_ms, seen_at_ms, ended_at_ms, client,
                                    method)
VALUES (%(id_digest)s, %(username)s, %(now_ms)s, %(now_ms)s + %(lifetime_ms)s,
        least(%(now_ms)s + %(idle_ms)s, %(now_ms)s + %(lifetime_ms)s), %(now_ms)s, NULL,
        %(client)s::varchar, %(method)s);

-- name: account_session_get
-- A session that still holds (not ended, not expired, its user enabled), with the user's role
-- and how it was made (password or sso).
SELECT s.id_digest, s.username, CASE WHEN u.all_projects THEN u.role ELSE 'none' END AS role, s.created_at_ms, s.expires_at_ms,
       s.idle_expires_at_ms, s.seen_at_ms, s.method
  FROM qinglong.user_sessions s JOIN qinglong.users u ON u.username = s.username
 WHERE s.id_digest = %(id_digest)s AND s.ended_at_ms IS NULL AND u.disabled_at_ms IS NULL
   AND s.expires_at_ms > %(now_ms)s AND s.idle_expires_at_ms > %(now_ms)s;

-- name: account_session_touch
-- Seen now: the idle expiry moves on (never past the absolute one).
UPDATE qinglong.user_sessions
   SET seen_at_ms = greatest(seen_at_ms, %(now_ms)s),
       idle_expires_at_ms = greatest(idle_expires_at_ms,
                                     least(%(now_ms)s + %(idle_ms)s, expires_at_ms))
 WHERE id_digest = %(id_digest)s AND ended_at_ms IS NULL;

-- name: account_session_end
-- Log out.
UPDATE qinglong.user_sessions SET ended_at_ms = %(now_ms)s
 WHERE id_digest = %(id_digest)s AND ended_at_ms IS NULL;

-- name: account_token_insert
-- A new API token (its secret's digest only).
INSERT INTO qinglong.api_tokens (id, username, name, scope, secret_digest, created_at_ms,
                                 expires_at_ms, last_used_at_ms, revoked_at_ms, revoked_by,
                                 projects)
VALUES (%(id)s, %(username)s, %(name)s, %(scope)s, %(secret_digest)s, %(now_ms)s,
        %(now_ms)s + %(lifetime_ms)s::bigint, NULL, NULL, NULL, %(projects)s::varchar);

-- name: account_token_get
-- One token by its public id, with its user's role and state.
SELECT t.*, CASE WHEN u.all_projects THEN u.role ELSE 'none' END AS role, u.disabled_at_ms AS user_disabled_at_ms
  FROM qinglong.api_tokens t JOIN qinglong.users u ON u.username = t.username
 WHERE t.id = %(id)s;

-- name: account_token_list
-- Tokens of one user (or of all when username is NULL), newest first.
SELECT t.*, CASE WHEN u.all_projects THEN u.role ELSE 'none' END AS role, u.disabled_at_ms AS user_disabled_at_ms
  FROM qinglong.api_tokens t JOIN qinglong.users u ON u.username = t.username
 WHERE %(username)s::varchar IS NULL OR t.username = %(username)s::varchar
 ORDER BY t.created_at_ms DESC, t.id;

-- name: account_token_used
-- Record a use (at most once per touch interval).
UPDATE qinglong.api_tokens SET last_used_at_ms = %(now_ms)s
 WHERE id = %(id)s
   AND (last_used_at_ms IS NULL OR last_used_at_ms <= %(now_ms)s - %(touch_after_ms)s);

-- name: account_token_revoke
-- Revoke a token (a revoked one keeps its first revocation).
UPDATE qinglong.api_tokens SET revoked_at_ms = %(now_ms)s, revoked_by = %(by)s
 WHERE id = %(id)s AND revoked_at_ms IS NULL;

-- name: account_login_lock
-- Serialize the attempts on one subject (user name, address or device) until COMMIT, so the
-- count that admits an attempt and the failure it records are one step (class 4417: logins).
SELECT pg_advisory_xact_lock(4417, hashtext(%(subject)s)) AS locked;

-- name: account_login_failure_count
-- Failed logins of one subject since a time, and the oldest of them.
SELECT count(*) AS n, min(at_ms) AS oldest_ms FROM qinglong.login_failures
 WHERE subject = %(subject)s AND at_ms > %(since_ms)s;

-- name: account_login_failure_insert
-- One failed login (recorded before the password is checked; deleted again on success).
INSERT INTO qinglong.login_failures (id, subject, at_ms)
VALUES (%(id)s, %(subject)s, %(now_ms)s);

-- name: account_login_failure_delete
-- Take back one recorded attempt (the password was right, or it was never checked).
DELETE FROM qinglong.login_failures WHERE id = %(id)s;

-- name: account_login_prune_lock
-- One pruner at a time (the others skip it): two prunes never wait on each other.
SELECT pg_try_advisory_xact_lock(4418, 1) AS held;

-- name: account_login_failures_prune
-- Forget failures older than the longest window.
DELETE FROM qinglong.login_failures WHERE at_ms < %(before_ms)s;

-- name: account_login_failures_clear
-- A successful login clears the failures of the subject that limited it.
DELETE FROM qinglong.login_failures WHERE subject = %(subject)s;

-- name: account_device_insert
-- A device that logged in as a user (its cookie's digest only).
INSERT INTO qinglong.login_devices (id_digest, username, created_at_ms, expires_at_ms)
VALUES (%(id_digest)s, %(username)s, %(now_ms)s, %(now_ms)s + %(lifetime_ms)s);

-- name: account_device_get
-- A device of a user that has not expired.
SELECT id_digest, username, created_at_ms, expires_at_ms FROM qinglong.login_devices
 WHERE id_digest = %(id_digest)s AND username = %(username)s AND expires_at_ms > %(now_ms)s;

-- name: account_devices_trim
-- Keep a user's newest devices only, and forget expired ones.
DELETE FROM qinglong.login_devices
 WHERE (username = %(username)s AND id_digest NOT IN (
            SELECT id_digest FROM qinglong.login_devices WHERE username = %(username)s
             ORDER BY created_at_ms DESC, id_digest LIMIT %(keep)s))
    OR expires_at_ms <= %(now_ms)s;

-- name: account_devices_end_for_user
-- Forget every device of a user (a new password, or disabled).
DELETE FROM qinglong.login_devices WHERE username = %(username)s;

-- name: account_tokens_revoke_for_user
-- Revoke every token of a user that is not revoked yet (a new password, or disabled).
UPDATE qinglong.api_tokens SET revoked_at_ms = %(now_ms)s, revoked_by = %(by)s
 WHERE username = %(username)s AND revoked_at_ms IS NULL;

-- name: account_user_rehash
-- Replace a password hash by a stronger hash of the same password (only if unchanged).
UPDATE qinglong.users SET password_hash = %(new_hash)s
 WHERE username = %(username)s AND password_hash = %(old_hash)s;

-- name: account_audit_insert
-- One audit entry; its id.
INSERT INTO qinglong.audit_log (at_ms, actor, via, token_id, action, project_id, target, detail,
                                client)
VALUES (%(now_ms)s, %(actor)s, %(via)s, %(token_id)s::varchar, %(action)s,
        %(project_id)s::varchar, %(target)s::varchar, %(detail)s::jsonb, %(client)s::varchar)
RETURNING id;

-- name: account_audit_list
-- Audit entries, newest first, before an id when given; of one actor, one action (or an action
-- under it: 'notify' keeps 'notify.test'), one project and at_ms in [since_ms, until_ms) when
-- given.
SELECT * FROM qinglong.audit_log
 WHERE (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
   AND (%(actor)s::varchar IS NULL OR actor = %(actor)s::varchar)
   AND (%(action)s::varchar IS NULL OR action = %(action)s::varchar
        OR left(action, length(%(action)s::varchar) + 1) = %(action)s::varchar || '.')
   AND (%(project_id)s::varchar IS NULL OR project_id = %(project_id)s::varchar)
   AND (%(since_ms)s::bigint IS NULL OR at_ms >= %(since_ms)s::bigint)
   AND (%(until_ms)s::bigint IS NULL OR at_ms < %(until_ms)s::bigint)
 ORDER BY id DESC LIMIT %(limit)s;

-- name: account_grants_of_user
-- The projects a user is granted a role on (per-project roles, 0024_grants), by project.
SELECT project_id, role FROM qinglong.user_grants WHERE username = %(username)s ORDER BY project_id;

-- name: account_grants_on_project
-- Who is granted a role on one project, by name.
SELECT username, project_id, role, granted_by, granted_at_ms
  FROM qinglong.user_grants WHERE project_id = %(project_id)s ORDER BY username;

-- name: account_grant_get
-- One grant.
SELECT username, project_id, role, granted_by, granted_at_ms
  FROM qinglong.user_grants WHERE username = %(username)s AND project_id = %(project_id)s;

-- name: account_grant_put
-- Grant a role on a project (replacing the one held).
INSERT INTO qinglong.user_grants (username, project_id, role, granted_by, granted_at_ms)
VALUES (%(username)s, %(project_id)s, %(role)s, %(by)s, %(now_ms)s)
ON CONFLICT (username, project_id) DO UPDATE
   SET role = excluded.role, granted_by = excluded.granted_by,
       granted_at_ms = excluded.granted_at_ms;

-- name: account_grant_delete
-- Take a grant back.
DELETE FROM qinglong.user_grants WHERE username = %(username)s AND project_id = %(project_id)s;
