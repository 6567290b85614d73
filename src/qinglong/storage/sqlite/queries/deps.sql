-- name: deps_current
-- The project's current dependency set: its latest revision (none before the first change).
SELECT * FROM dep_set_revisions WHERE project_id = :project_id
ORDER BY revision DESC LIMIT 1;

-- name: deps_history
-- The project's revisions, newest first.
SELECT * FROM dep_set_revisions WHERE project_id = :project_id
ORDER BY revision DESC LIMIT :limit;

-- name: deps_insert
-- One change: the whole set after it, immutable.
INSERT INTO dep_set_revisions (project_id, revision, digest, set_json, created_by,
                               created_at_ms)
VALUES (:project_id, :revision, :digest, :set_json, :created_by, :now_ms);
