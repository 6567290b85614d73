-- name: project_env_project
-- The project an environment belongs to (it must exist).
SELECT id, status FROM qinglong.projects WHERE id = %(project_id)s;

-- name: project_env_head
-- A project's latest environment revision (none before its first change).
SELECT revision, digest, change, created_by, created_at_ms
FROM qinglong.project_env_revisions WHERE project_id = %(project_id)s
ORDER BY revision DESC LIMIT 1;

-- name: project_env_entries
-- The entries of one revision, by name.
SELECT name, enabled, secret, description, value_digest, value, sealed, key_id
FROM qinglong.project_env_entries
WHERE project_id = %(project_id)s AND revision = %(revision)s ORDER BY name;

-- name: project_env_revision_insert
-- A new revision (its number is the latest's plus one: a concurrent change conflicts).
INSERT INTO qinglong.project_env_revisions
    (project_id, revision, digest, change, created_by, created_at_ms)
VALUES (%(project_id)s, %(revision)s, %(digest)s, %(change)s::jsonb, %(actor)s, %(now_ms)s);

-- name: project_env_entry_insert
-- One entry of a new revision.
INSERT INTO qinglong.project_env_entries
    (project_id, revision, name, enabled, secret, description, value_digest, value, sealed,
     key_id)
VALUES (%(project_id)s, %(revision)s, %(name)s, %(enabled)s, %(secret)s, %(description)s,
        %(value_digest)s, %(value)s::text, %(sealed)s::text, %(key_id)s::varchar);

-- name: project_env_history
-- A project's revisions, newest first, before a revision when given, with their entry count.
SELECT r.revision, r.digest, r.change, r.created_by, r.created_at_ms,
       (SELECT count(*) FROM qinglong.project_env_entries e
         WHERE e.project_id = r.project_id AND e.revision = r.revision) AS entries
FROM qinglong.project_env_revisions r
WHERE r.project_id = %(project_id)s
  AND (%(before)s::integer IS NULL OR r.revision < %(before)s::integer)
ORDER BY r.revision DESC LIMIT %(limit)s;

-- name: project_env_lease
-- The project's latest revision and its enabled entries, as a leased Attempt injects them
-- (one row with NULL entry columns when no entry is enabled; no row before the first change).
SELECT r.revision, r.digest, e.name, e.value, e.sealed, e.key_id
FROM qinglong.project_env_revisions r
LEFT JOIN qinglong.project_env_entries e
  ON e.project_id = r.project_id AND e.revision = r.revision AND e.enabled
WHERE r.project_id = %(project_id)s
  AND r.revision = (SELECT max(revision) FROM qinglong.project_env_revisions
                     WHERE project_id = %(project_id)s)
ORDER BY e.name;

-- name: attempt_environment_record
-- Which environment revision an Attempt was leased with (its number and digest).
UPDATE qinglong.run_attempts
SET environment_revision = %(revision)s, environment_digest = %(digest)s
WHERE id = %(attempt_id)s;

-- name: secret_keyring_get
-- The key the secrets are sealed under, and the sealed digest key.
SELECT key_id, digest_key, updated_at_ms FROM qinglong.secret_keyring WHERE id = 1;

-- name: secret_keyring_insert
-- The keyring, at the first secret.
INSERT INTO qinglong.secret_keyring (id, key_id, digest_key, updated_at_ms)
VALUES (1, %(key_id)s, %(digest_key)s, %(now_ms)s);

-- name: secret_keyring_update
-- The keyring under a new key (rotation).
UPDATE qinglong.secret_keyring
SET key_id = %(key_id)s, digest_key = %(digest_key)s, updated_at_ms = %(now_ms)s
WHERE id = 1 AND key_id = %(old_key_id)s;

-- name: project_env_sealed_all
-- Every sealed value of every revision (rotation).
SELECT project_id, revision, name, sealed, key_id FROM qinglong.project_env_entries
WHERE secret ORDER BY project_id, revision, name;

-- name: project_env_reseal
-- One value sealed again under the new key (its content and digest stay).
UPDATE qinglong.project_env_entries SET sealed = %(sealed)s, key_id = %(key_id)s
WHERE project_id = %(project_id)s AND revision = %(revision)s AND name = %(name)s;

-- name: project_env_audit
-- An audit entry of an environment or key change (ql_admin may insert, not read, the log).
INSERT INTO qinglong.audit_log (at_ms, actor, via, token_id, action, project_id, target, detail,
                                client)
VALUES (%(now_ms)s, %(actor)s, %(via)s, %(token_id)s::varchar, %(action)s,
        %(project_id)s::varchar, %(target)s::varchar, %(detail)s::jsonb, %(client)s::varchar);
