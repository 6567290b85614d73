-- Run now (`ql task run`, `ql trigger fire`): the reads of a manual admission, inside its
-- SERIALIZABLE transaction (as ql_runtime, which may read definitions and write Runs). Every
-- read is an index lookup by primary or unique key, so its predicate locks cover what it
-- read and nothing more. The rows themselves are written by run_insert, attempt_insert and
-- events_insert, as for every admission.

-- name: manual_run_by_key
-- The Run a request id admitted, by its idempotency key (unique within a project).
SELECT id, task_id, trigger_id, trigger_type, parameters::text AS parameters
FROM qinglong.runs
WHERE project_id = %(project_id)s AND idempotency_key = %(key)s;

-- name: manual_project_get
-- The project a manual Run is asked for, with its status.
SELECT id, status FROM qinglong.projects WHERE id = %(project_id)s;

-- name: manual_task_current
-- A task's current revision, and whether its head is deleted.
SELECT r.*, h.deleted_at_ms AS h_deleted_at_ms
FROM qinglong.task_definitions h
JOIN qinglong.task_definition_revisions r
  ON r.project_id = h.project_id AND r.task_id = h.task_id AND r.revision = h.current_revision
WHERE h.project_id = %(project_id)s AND h.task_id = %(task_id)s;

-- name: manual_trigger_current
-- A trigger's current revision, and whether its head is deleted.
SELECT r.*, h.deleted_at_ms AS h_deleted_at_ms
FROM qinglong.triggers h
JOIN qinglong.trigger_revisions r
  ON r.project_id = h.project_id AND r.trigger_id = h.trigger_id
 AND r.revision = h.current_revision
WHERE h.project_id = %(project_id)s AND h.trigger_id = %(trigger_id)s;

-- name: manual_execution_revision
-- The execution revision compiled from one task revision, for one executor type.
SELECT * FROM qinglong.task_execution_revisions
WHERE project_id = %(project_id)s AND task_id = %(task_id)s
  AND source_revision = %(source_revision)s AND executor_type = %(executor_type)s;
