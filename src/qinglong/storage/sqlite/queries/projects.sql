-- name: project_insert
-- Create an active project.
INSERT INTO projects (id, slug, name, status, version, created_at_ms, updated_at_ms)
VALUES (:id, :id, :name, 'active', 1, :now_ms, :now_ms)
RETURNING *;

-- name: project_get
-- One project by id.
SELECT * FROM projects WHERE id = :id;

-- name: project_list
-- Every project, by id.
SELECT * FROM projects ORDER BY id;

-- name: project_archive
-- Archive an active project (its triggers stop being due).
UPDATE projects
SET status = 'archived', version = version + 1, updated_at_ms = max(updated_at_ms, :now_ms)
WHERE id = :id AND status = 'active'
RETURNING *;

-- name: project_unarchive
-- Restore an archived project (its triggers may fire again).
UPDATE projects
SET status = 'active', version = version + 1, updated_at_ms = max(updated_at_ms, :now_ms)
WHERE id = :id AND status = 'archived'
RETURNING *;

-- name: project_archival_open
-- Record the start of an archival.
INSERT INTO project_archivals (project_id, archived_at_ms, restored_at_ms)
VALUES (:id, :now_ms, NULL);

-- name: project_archival_close
-- Record the end of the open archival of a project.
UPDATE project_archivals SET restored_at_ms = max(archived_at_ms, :now_ms)
WHERE project_id = :id AND restored_at_ms IS NULL;

-- name: global_limit_get
-- The cap on Runs executing at once (no row: no cap).
SELECT max_running, updated_at_ms FROM concurrency_limits WHERE scope = 'global';

-- name: global_limit_set
-- Set the cap.
INSERT INTO concurrency_limits (scope, max_running, updated_at_ms)
VALUES ('global', :max_running, :now_ms)
ON CONFLICT (scope) DO UPDATE SET max_running = excluded.max_running,
                                  updated_at_ms = excluded.updated_at_ms;

-- name: global_limit_clear
-- Remove the cap.
DELETE FROM concurrency_limits WHERE scope = 'global';
