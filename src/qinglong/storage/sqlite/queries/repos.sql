-- name: repo_get
-- One subscription, removed or not.
SELECT * FROM repos WHERE project_id = :project_id AND name = :name;

-- name: repo_list
-- The project's subscriptions by name (removed ones only when asked for).
SELECT * FROM repos WHERE project_id = :project_id AND (removed_at_ms IS NULL OR :removed)
ORDER BY name;

-- name: repo_insert
-- A new subscription.
INSERT INTO repos (project_id, name, spec_json, created_by, created_at_ms, updated_at_ms)
VALUES (:project_id, :name, :spec_json, :created_by, :now_ms, :now_ms);

-- name: repo_update
-- A subscription's new spec (a removed one comes back).
UPDATE repos SET spec_json = :spec_json, updated_at_ms = :now_ms, removed_at_ms = NULL
WHERE project_id = :project_id AND name = :name;

-- name: repo_remove
-- A subscription ends (its row stays, with what its pulls found).
UPDATE repos SET removed_at_ms = :now_ms, updated_at_ms = :now_ms
WHERE project_id = :project_id AND name = :name AND removed_at_ms IS NULL;

-- name: repo_pulled
-- What the latest pull found.
UPDATE repos SET last_commit = :commit, last_pull_at_ms = :now_ms,
                 last_report_json = :report_json
WHERE project_id = :project_id AND name = :name;
