-- Run now (`ql task run`, `ql trigger fire`): the reads of a manual admission, inside its
-- BEGIN IMMEDIATE transaction. The rows themselves are written by run_insert, attempt_insert
-- and event_insert, as for every admission.

-- name: manual_run_by_key
-- The Run a request id admitted, by its idempotency key (unique within a project).
SELECT id, task_id, trigger_id, trigger_type, parameters
FROM runs
WHERE project_id = :project_id AND idempotency_key = :key;

-- name: manual_project_get
-- The project a manual Run is asked for, with its status.
SELECT id, status FROM projects WHERE id = :project_id;

-- name: manual_task_current
-- A task's current revision, and whether its head is deleted.
SELECT r.*, h.deleted_at_ms AS h_deleted_at_ms
FROM task_definitions h
JOIN task_definition_revisions r
  ON r.project_id = h.project_id AND r.task_id = h.task_id AND r.revision = h.current_revision
WHERE h.project_id = :project_id AND h.task_id = :task_id;

-- name: manual_trigger_current
-- A trigger's current revision, and whether its head is deleted.
SELECT r.*, h.deleted_at_ms AS h_deleted_at_ms
FROM triggers h
JOIN trigger_revisions r
  ON r.project_id = h.project_id AND r.trigger_id = h.trigger_id
 AND r.revision = h.current_revision
WHERE h.project_id = :project_id AND h.trigger_id = :trigger_id;

-- name: manual_execution_revision
-- The execution revision compiled from one task revision, for one executor type.
SELECT * FROM task_execution_revisions
WHERE project_id = :project_id AND task_id = :task_id AND source_revision = :source_revision
  AND executor_type = :executor_type;
