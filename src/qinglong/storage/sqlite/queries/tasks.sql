-- name: task_head_get
-- A task head.
SELECT * FROM task_definitions WHERE project_id = :project_id AND task_id = :task_id;

-- name: task_head_insert
-- Create a task head at revision 1.
INSERT INTO task_definitions (project_id, task_id, current_revision, created_at_ms, updated_at_ms)
VALUES (:project_id, :task_id, 1, :now_ms, :now_ms);

-- name: task_head_advance
-- Move a task head to its next revision (compare-and-set on the current revision); a publish
-- restores a deleted task.
UPDATE task_definitions
SET current_revision = :revision, updated_at_ms = max(updated_at_ms, :now_ms),
    deleted_at_ms = NULL
WHERE project_id = :project_id AND task_id = :task_id AND current_revision = :expected_revision;

-- name: task_head_delete
-- Mark a task deleted (its revisions stay: Runs and the audit refer to them).
UPDATE task_definitions
SET deleted_at_ms = :now_ms, updated_at_ms = max(updated_at_ms, :now_ms)
WHERE project_id = :project_id AND task_id = :task_id AND deleted_at_ms IS NULL;

-- name: task_revision_list
-- Every revision of a task, oldest first.
SELECT * FROM task_definition_revisions
WHERE project_id = :project_id AND task_id = :task_id ORDER BY revision;

-- name: task_revision_get
-- One task revision.
SELECT * FROM task_definition_revisions
WHERE project_id = :project_id AND task_id = :task_id AND revision = :revision;

-- name: task_revision_insert
-- Append an immutable task revision.
INSERT INTO task_definition_revisions
    (project_id, task_id, revision, name, kind, spec_json, enabled, content_digest, created_at_ms)
VALUES
    (:project_id, :task_id, :revision, :name, :kind, :spec_json, :enabled, :content_digest,
     :created_at_ms);

-- name: task_execution_revision_insert
-- Append the execution revision compiled from a task revision.
INSERT INTO task_execution_revisions
    (project_id, task_id, source_revision, task_revision, source_content_digest, executor_type,
     plan_schema, plan_json, content_digest, created_at_ms)
VALUES
    (:project_id, :task_id, :source_revision, :task_revision, :source_content_digest,
     :executor_type, :plan_schema, :plan_json, :content_digest, :created_at_ms);

-- name: task_execution_revision_get
-- The execution revision a Run pinned, by its qltd:v1 reference.
SELECT * FROM task_execution_revisions
WHERE project_id = :project_id AND task_id = :task_id AND task_revision = :task_revision
  AND executor_type = :executor_type;

-- name: task_list
-- The current revision of every task of a project (deleted ones only when asked; only the
-- ones labelled :label when it is given).
SELECT r.*, h.deleted_at_ms AS h_deleted_at_ms
FROM task_definitions h
JOIN task_definition_revisions r
  ON r.project_id = h.project_id AND r.task_id = h.task_id AND r.revision = h.current_revision
WHERE h.project_id = :project_id
  AND (:task_id IS NULL OR h.task_id = :task_id)
  AND (:include_deleted OR h.deleted_at_ms IS NULL)
  AND (:label IS NULL OR EXISTS (
         SELECT 1 FROM task_labels l
          WHERE l.project_id = h.project_id AND l.task_id = h.task_id AND l.label = :label))
ORDER BY h.task_id;

-- name: task_head_restore
-- A publish brings a deleted task back.
UPDATE task_definitions SET deleted_at_ms = NULL
WHERE project_id = :project_id AND task_id = :task_id;
