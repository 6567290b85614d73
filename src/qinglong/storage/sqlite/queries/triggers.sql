-- name: trigger_head_get
-- A trigger head.
SELECT * FROM triggers WHERE project_id = :project_id AND trigger_id = :trigger_id;

-- name: trigger_head_insert
-- Create a trigger head at revision 1, bound to its task for life.
INSERT INTO triggers (project_id, trigger_id, task_id, current_revision, created_at_ms, updated_at_ms)
VALUES (:project_id, :trigger_id, :task_id, 1, :now_ms, :now_ms);

-- name: trigger_head_advance
-- Move a trigger head to its next revision (compare-and-set on the current revision); a
-- publish restores a deleted trigger.
UPDATE triggers
SET current_revision = :revision, updated_at_ms = max(updated_at_ms, :now_ms),
    deleted_at_ms = NULL
WHERE project_id = :project_id AND trigger_id = :trigger_id
  AND current_revision = :expected_revision;

-- name: trigger_head_delete
-- Mark a trigger deleted (its revisions stay: Runs and the audit refer to them).
UPDATE triggers
SET deleted_at_ms = :now_ms, updated_at_ms = max(updated_at_ms, :now_ms)
WHERE project_id = :project_id AND trigger_id = :trigger_id AND deleted_at_ms IS NULL;

-- name: trigger_revision_get
-- One trigger revision.
SELECT * FROM trigger_revisions
WHERE project_id = :project_id AND trigger_id = :trigger_id AND revision = :revision;

-- name: trigger_revision_insert
-- Append an immutable trigger revision.
INSERT INTO trigger_revisions
    (project_id, trigger_id, revision, task_id, task_revision, task_content_digest, spec_json,
     enabled, content_digest, created_at_ms)
VALUES
    (:project_id, :trigger_id, :revision, :task_id, :task_revision, :task_content_digest,
     :spec_json, :enabled, :content_digest, :created_at_ms);

-- name: trigger_ids_for_task
-- Triggers bound to a task and not deleted (for re-pinning after a task publish).
SELECT trigger_id FROM triggers
WHERE project_id = :project_id AND task_id = :task_id AND deleted_at_ms IS NULL
ORDER BY trigger_id;

-- name: trigger_list
-- Current trigger revisions with their schedule rows and firing facts, in one project or all
-- (only the ones labelled :label when it is given).
SELECT r.*,
       s.trigger_revision AS s_trigger_revision, s.next_fire_at_ms AS s_next_fire_at_ms,
       s.last_scheduled_at_ms AS s_last_scheduled_at_ms, s.state_version AS s_state_version,
       s.updated_at_ms AS s_updated_at_ms,
       s.paused_from_ms AS s_paused_from_ms, s.paused_until_ms AS s_paused_until_ms,
       (SELECT z.reason FROM trigger_pauses z
         WHERE z.project_id = h.project_id AND z.trigger_id = h.trigger_id
           AND z.paused_at_ms = s.paused_from_ms) AS pause_reason,
       (th.current_revision = r.task_revision) AS task_pin_current,
       (p.status = 'active') AS project_active,
       h.deleted_at_ms AS h_deleted_at_ms
FROM triggers h
JOIN trigger_revisions r
  ON r.project_id = h.project_id AND r.trigger_id = h.trigger_id AND r.revision = h.current_revision
JOIN task_definitions th ON th.project_id = r.project_id AND th.task_id = r.task_id
JOIN projects p ON p.id = h.project_id
LEFT JOIN trigger_schedules s ON s.project_id = h.project_id AND s.trigger_id = h.trigger_id
WHERE (:project_id IS NULL OR h.project_id = :project_id)
  AND (:trigger_id IS NULL OR h.trigger_id = :trigger_id)
  AND (:include_deleted OR h.deleted_at_ms IS NULL)
  AND (:label IS NULL OR EXISTS (
         SELECT 1 FROM trigger_labels l
          WHERE l.project_id = h.project_id AND l.trigger_id = h.trigger_id
            AND l.label = :label))
ORDER BY h.project_id, h.trigger_id;

-- name: schedule_insert
-- A new trigger's schedule row: NULL cursor, version 0.
INSERT INTO trigger_schedules
    (project_id, trigger_id, trigger_revision, next_fire_at_ms, last_scheduled_at_ms,
     state_version, updated_at_ms)
VALUES (:project_id, :trigger_id, :trigger_revision, NULL, NULL, 0, :now_ms);

-- name: schedule_reset
-- A new revision resets the cursor; the version bump fences any decision in flight.
UPDATE trigger_schedules
SET trigger_revision = :trigger_revision, next_fire_at_ms = NULL, next_due_at_ms = NULL,
    last_scheduled_at_ms = NULL, state_version = state_version + 1,
    updated_at_ms = max(updated_at_ms, :now_ms)
WHERE project_id = :project_id AND trigger_id = :trigger_id;

-- name: trigger_head_restore
-- A publish brings a deleted trigger back.
UPDATE triggers SET deleted_at_ms = NULL
WHERE project_id = :project_id AND trigger_id = :trigger_id;

-- name: trigger_pause_open
-- The trigger's pause in effect at :now_ms (not resumed, its until not reached), if any.
SELECT paused_at_ms, until_ms, reason, paused_by FROM trigger_pauses
WHERE project_id = :project_id AND trigger_id = :trigger_id AND resumed_at_ms IS NULL
  AND paused_at_ms <= :now_ms AND (until_ms IS NULL OR until_ms > :now_ms)
ORDER BY paused_at_ms DESC LIMIT 1;

-- name: trigger_pause_insert
-- A new pause on record.
INSERT INTO trigger_pauses
    (project_id, trigger_id, paused_at_ms, until_ms, resumed_at_ms, reason, paused_by, resumed_by)
VALUES (:project_id, :trigger_id, :now_ms, :until_ms, NULL, :reason, :actor, NULL);

-- name: trigger_pause_amend
-- Pausing a paused trigger again changes when it ends and why.
UPDATE trigger_pauses SET until_ms = :until_ms, reason = :reason
WHERE project_id = :project_id AND trigger_id = :trigger_id
  AND paused_at_ms = :paused_at_ms AND resumed_at_ms IS NULL;

-- name: trigger_pause_end
-- A resume by hand: the pause ends now.
UPDATE trigger_pauses SET resumed_at_ms = :now_ms, resumed_by = :actor
WHERE project_id = :project_id AND trigger_id = :trigger_id
  AND paused_at_ms = :paused_at_ms AND resumed_at_ms IS NULL;

-- name: schedule_pause_set
-- The latest pause onto the schedule row; the version bump fences a decision in flight.
UPDATE trigger_schedules
SET paused_from_ms = :paused_from_ms, paused_until_ms = :paused_until_ms,
    state_version = state_version + 1, updated_at_ms = max(updated_at_ms, :now_ms)
WHERE project_id = :project_id AND trigger_id = :trigger_id;
