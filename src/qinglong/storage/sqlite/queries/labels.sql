-- Labels on tasks and triggers (migration 0026_labels): the store is
-- storage/labels.py. A set of labels is replaced whole: cleared, then each inserted.

-- name: label_task_live
-- The task head, when it exists and is not deleted.
SELECT h.task_id FROM task_definitions h
 WHERE h.project_id = :project_id AND h.task_id = :entity_id AND h.deleted_at_ms IS NULL;

-- name: label_trigger_live
-- The trigger head, when it exists and is not deleted.
SELECT h.trigger_id FROM triggers h
 WHERE h.project_id = :project_id AND h.trigger_id = :entity_id AND h.deleted_at_ms IS NULL;

-- name: task_labels_clear
-- Every label of one task.
DELETE FROM task_labels WHERE project_id = :project_id AND task_id = :entity_id;

-- name: task_label_insert
-- One label on one task.
INSERT INTO task_labels (project_id, task_id, label)
VALUES (:project_id, :entity_id, :label);

-- name: trigger_labels_clear
-- Every label of one trigger.
DELETE FROM trigger_labels WHERE project_id = :project_id AND trigger_id = :entity_id;

-- name: trigger_label_insert
-- One label on one trigger.
INSERT INTO trigger_labels (project_id, trigger_id, label)
VALUES (:project_id, :entity_id, :label);

-- name: task_labels_list
-- The labels of the tasks of one project (of one task when entity_id is given).
SELECT l.project_id, l.task_id AS entity_id, l.label FROM task_labels l
 WHERE l.project_id = :project_id
   AND (:entity_id IS NULL OR l.task_id = :entity_id)
 ORDER BY l.task_id, l.label;

-- name: trigger_labels_list
-- The labels of the triggers of one project, or of every project (of one trigger when
-- entity_id is given).
SELECT l.project_id, l.trigger_id AS entity_id, l.label FROM trigger_labels l
 WHERE (:project_id IS NULL OR l.project_id = :project_id)
   AND (:entity_id IS NULL OR l.trigger_id = :entity_id)
 ORDER BY l.project_id, l.trigger_id, l.label;
