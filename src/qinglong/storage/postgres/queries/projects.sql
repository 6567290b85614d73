-- name: project_insert
-- Create an active project.
INSERT INTO qinglong.projects (id, slug, name, status, version, created_at_ms, updated_at_ms)
VALUES (%(id)s, %(id)s, %(name)s, 'active', 1, %(now_ms)s, %(now_ms)s)
RETURNING *;

-- name: project_get
-- One project by id.
SELECT * FROM qinglong.projects WHERE id = %(id)s;

-- name: project_list
-- Every project, by id.
SELECT * FROM qinglong.projects ORDER BY id;

-- name: project_archive
-- Archive an active project (its triggers stop being claimable).
UPDATE qinglong.projects
SET status = 'archived', version = version + 1, updated_at_ms = greatest(updated_at_ms, %(now_ms)s)
WHERE id = %(id)s AND status = 'active'
RETURNING *;

-- name: project_unarchive
-- Restore an archived project (its triggers may fire again).
UPDATE qinglong.projects
SET status = 'active', version = version + 1, updated_at_ms = greatest(updated_at_ms, %(now_ms)s)
WHERE id = %(id)s AND status = 'archived'
RETURNING *;

-- name: project_archival_open
-- Record the start of an archival.
INSERT INTO qinglong.project_archivals (project_id, archived_at_ms, restored_at_ms)
VALUES (%(id)s, %(now_ms)s, NULL);

-- name: project_archival_close
-- Record the end of the open archival of a project.
UPDATE qinglong.project_archivals SET restored_at_ms = greatest(archived_at_ms, %(now_ms)s)
WHERE project_id = %(id)s AND restored_at_ms IS NULL;

-- name: global_limit_get
-- The cluster-wide cap on Runs executing at once (no row: no cap).
SELECT max_running, updated_at_ms FROM qinglong.concurrency_limits WHERE scope = 'global';

-- name: global_limit_set
-- Set the cluster-wide cap.
INSERT INTO qinglong.concurrency_limits (scope, max_running, updated_at_ms)
VALUES ('global', %(max_running)s, %(now_ms)s)
ON CONFLICT (scope) DO UPDATE SET max_running = EXCLUDED.max_running,
                                  updated_at_ms = EXCLUDED.updated_at_ms;

-- name: global_limit_clear
-- Remove the cluster-wide cap.
DELETE FROM qinglong.concurrency_limits WHERE scope = 'global';
