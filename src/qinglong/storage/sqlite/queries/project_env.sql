-- name: project_env_project
-- The project an environment belongs to (it must exist).
SELECT id, status FROM projects WHERE id = :project_id;

-- name: project_env_head
-- A project's latest environment revision (none before its first change).
SELECT revision, digest, change, created_by, created_at_ms
FROM project_env_revisions WHERE project_id = :project_id
ORDER BY revision DESC LIMIT 1;

-- name: project_env_entries
-- The entries of one revision, by name.
SELECT name, enabled, secret, description, value_digest, value, sealed, key_id
FROM project_env_entries
WHERE project_id = :project_id AND revision = :revision ORDER BY name;

-- name: project_env_revision_insert
-- A new revision (its number is the latest's plus one: a concurrent change conflicts).
INSERT INTO project_env_revisions
    (project_id, revision, digest, change, created_by, created_at_ms)
VALUES (:project_id, :revision, :digest, :change, :actor, :now_ms);

-- name: project_env_entry_insert
-- One entry of a new revision.
INSERT INTO project_env_entries
    (project_id, revision, name, enabled, secret, description, value_digest, value, sealed,
     key_id)
VALUES (:project_id, :revision, :name, :enabled, :secret, :description,
        :value_digest, :value, :sealed, :key_id);

-- name: project_env_history
-- A project's revisions, newest first, before a revision when given, with their entry count.
SELECT r.revision, r.digest, r.change, r.created_by, r.created_at_ms,
       (SELECT count(*) FROM project_env_entries e
         WHERE e.project_id = r.project_id AND e.revision = r.revision) AS entries
FROM project_env_revisions r
WHERE r.project_id = :project_id
  AND (:before IS NULL OR r.revision < :before)
ORDER BY r.revision DESC LIMIT :limit;

-- name: project_env_lease
-- The project's latest revision and its enabled entries, as a leased Attempt injects them
-- (one row with NULL entry columns when no entry is enabled; no row before the first change).
SELECT r.revision, r.digest, e.name, e.value, e.sealed, e.key_id
FROM project_env_revisions r
LEFT JOIN project_env_entries e
  ON e.project_id = r.project_id AND e.revision = r.revision AND e.enabled = 1
WHERE r.project_id = :project_id
  AND r.revision = (SELECT max(revision) FROM project_env_revisions
                     WHERE project_id = :project_id)
ORDER BY e.name;

-- name: attempt_environment_record
-- Which environment revision an Attempt was leased with (its number and digest).
UPDATE run_attempts
SET environment_revision = :revision, environment_digest = :digest
WHERE id = :attempt_id;

-- name: secret_keyring_get
-- The key the secrets are sealed under, and the sealed digest key.
SELECT key_id, digest_key, updated_at_ms FROM secret_keyring WHERE id = 1;

-- name: secret_keyring_insert
-- The keyring, at the first secret.
INSERT INTO secret_keyring (id, key_id, digest_key, updated_at_ms)
VALUES (1, :key_id, :digest_key, :now_ms);

-- name: secret_keyring_update
-- The keyring under a new key (rotation).
UPDATE secret_keyring
SET key_id = :key_id, digest_key = :digest_key, updated_at_ms = :now_ms
WHERE id = 1 AND key_id = :old_key_id;

-- name: project_env_sealed_all
-- Every sealed value of every revision (rotation).
SELECT project_id, revision, name, sealed, key_id FROM project_env_entries
WHERE secret = 1 ORDER BY project_id, revision, name;

-- name: project_env_reseal
-- One value sealed again under the new key (its content and digest stay).
UPDATE project_env_entries SET sealed = :sealed, key_id = :key_id
WHERE project_id = :project_id AND revision = :revision AND name = :name;

-- name: project_env_audit
-- An audit entry of an environment or key change (ql_admin may insert, not read, the log).
INSERT INTO audit_log (at_ms, actor, via, token_id, action, project_id, target, detail,
                                client)
VALUES (:now_ms, :actor, :via, :token_id, :action,
        :project_id, :target, :detail, :client);
