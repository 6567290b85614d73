-- name: repo_get
-- One subscription, removed or not.
SELECT * FROM qinglong.repos WHERE project_id = %(project_id)s AND name = %(name)s;

-- name: repo_list
-- The project's subscriptions by name (removed ones only when asked for).
SELECT * FROM qinglong.repos WHERE project_id = %(project_id)s AND (removed_at_ms IS NULL OR %(removed)s::boolean)
ORDER BY name;

-- name: repo_insert
-- A new subscription.
INSERT INTO qinglong.repos (project_id, name, spec_json, created_by, created_at_ms, updated_at_ms)
VALUES (%(project_id)s, %(name)s, %(spec_json)s::jsonb, %(created_by)s, %(now_ms)s, %(now_ms)s);

-- name: repo_update
-- A subscription's new spec (a removed one comes back).
UPDATE qinglong.repos SET spec_json = %(spec_json)s::jsonb, updated_at_ms = %(now_ms)s, removed_at_ms = NULL
WHERE project_id = %(project_id)s AND name = %(name)s;

-- name: repo_remove
-- A subscription ends (its row stays, with what its pulls found).
UPDATE qinglong.repos SET removed_at_ms = %(now_ms)s, updated_at_ms = %(now_ms)s
WHERE project_id = %(project_id)s AND name = %(name)s AND removed_at_ms IS NULL;

-- name: repo_pulled
-- What the latest pull found.
UPDATE qinglong.repos SET last_commit = %(commit)s, last_pull_at_ms = %(now_ms)s,
                 last_report_json = %(report_json)s::jsonb
WHERE project_id = %(project_id)s AND name = %(name)s;
