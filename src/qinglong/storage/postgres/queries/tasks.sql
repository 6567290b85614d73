-- name: task_head_get
-- A task head, locked for a publish.
SELECT * FROM qinglong.task_definitions
WHERE project_id = %(project_id)s AND task_id = %(task_id)s FOR UPDATE;

-- name: task_head_insert
-- Create a task head at revision 1.
INSERT INTO qinglong.task_definitions (project_id, task_id, current_revision, created_at_ms, updated_at_ms)
VALUES (%(project_id)s, %(task_id)s, 1, %(now_ms)s, %(now_ms)s);

-- name: task_head_advance
-- Move a task head to its next revision (compare-and-set); a publish restores a deleted task.
UPDATE qinglong.task_definitions
SET current_revision = %(revision)s, updated_at_ms = greatest(updated_at_ms, %(now_ms)s),
    deleted_at_ms = NULL
WHERE project_id = %(project_id)s AND task_id = %(task_id)s
  AND current_revision = %(expected_revision)s;

-- name: task_head_delete
-- Mark a task deleted (its revisions stay: Runs and the audit refer to them).
UPDATE qinglong.task_definitions
SET deleted_at_ms = %(now_ms)s, updated_at_ms = greatest(updated_at_ms, %(now_ms)s)
WHERE project_id = %(project_id)s AND task_id = %(task_id)s AND deleted_at_ms IS NULL;

-- name: task_revision_list
-- Every revision of a task, oldest first.
SELECT * FROM qinglong.task_definition_revisions
WHERE project_id = %(project_id)s AND task_id = %(task_id)s ORDER BY revision;

-- name: task_revision_get
-- One task revision.
SELECT * FROM qinglong.task_definition_revisions
WHERE project_id = %(project_id)s AND task_id = %(task_id)s AND revision = %(revision)s;

-- name: task_revision_insert
-- Append an immutable task revision.
INSERT INTO qinglong.task_definition_revisions
    (project_id, task_id, revision, name, kind, spec_json, enabled, content_digest, created_at_ms)
VALUES
    (%(project_id)s, %(task_id)s, %(revision)s, %(name)s, %(kind)s, %(spec_json)s, %(enabled)s,
     %(content_digest)s, %(created_at_ms)s);

-- name: task_execution_revision_insert
-- Append the remote_worker execution revision compiled from a task revision.
INSERT INTO qinglong.task_execution_revisions
    (project_id, task_id, source_revision, task_revision, source_content_digest, executor_type,
     plan_schema, plan_json, content_digest, created_at_ms)
VALUES
    (%(project_id)s, %(task_id)s, %(source_revision)s, %(task_revision)s,
     %(source_content_digest)s, %(executor_type)s, %(plan_schema)s, %(plan_json)s,
     %(content_digest)s, %(created_at_ms)s);

-- name: task_list
-- The current revision of every task of a project (deleted ones only when asked; only the
-- ones labelled %(label)s when it is given).
SELECT r.*, h.deleted_at_ms AS h_deleted_at_ms
FROM qinglong.task_definitions h
JOIN qinglong.task_definition_revisions r
  ON r.project_id = h.project_id AND r.task_id = h.task_id AND r.revision = h.current_revision
WHERE h.project_id = %(project_id)s
  AND (%(task_id)s::varchar IS NULL OR h.task_id = %(task_id)s::varchar)
  AND (%(include_deleted)s::boolean OR h.deleted_at_ms IS NULL)
  AND (%(label)s::varchar IS NULL OR EXISTS (
         SELECT 1 FROM qinglong.task_labels l
          WHERE l.project_id = h.project_id AND l.task_id = h.task_id
            AND l.label = %(label)s::varchar))
ORDER BY h.task_id;

-- name: task_head_restore
-- A publish brings a deleted task back.
UPDATE qinglong.task_definitions SET deleted_at_ms = NULL
WHERE project_id = %(project_id)s AND task_id = %(task_id)s;
