-- name: trigger_head_get
-- A trigger head, locked for a publish.
SELECT * FROM qinglong.triggers
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s FOR UPDATE;

-- name: trigger_head_insert
-- Create a trigger head at revision 1, bound to its task for life.
INSERT INTO qinglong.triggers
    (project_id, trigger_id, task_id, current_revision, created_at_ms, updated_at_ms)
VALUES (%(project_id)s, %(trigger_id)s, %(task_id)s, 1, %(now_ms)s, %(now_ms)s);

-- name: trigger_head_advance
-- Move a trigger head to its next revision (compare-and-set); a publish restores a deleted
-- trigger.
UPDATE qinglong.triggers
SET current_revision = %(revision)s, updated_at_ms = greatest(updated_at_ms, %(now_ms)s),
    deleted_at_ms = NULL
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s
  AND current_revision = %(expected_revision)s;

-- name: trigger_head_delete
-- Mark a trigger deleted (its revisions stay: Runs and the audit refer to them).
UPDATE qinglong.triggers
SET deleted_at_ms = %(now_ms)s, updated_at_ms = greatest(updated_at_ms, %(now_ms)s)
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s AND deleted_at_ms IS NULL;

-- name: trigger_revision_get
-- One trigger revision.
SELECT * FROM qinglong.trigger_revisions
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s AND revision = %(revision)s;

-- name: trigger_revision_insert
-- Append an immutable trigger revision.
INSERT INTO qinglong.trigger_revisions
    (project_id, trigger_id, revision, task_id, task_revision, task_content_digest, spec_json,
     enabled, content_digest, created_at_ms)
VALUES
    (%(project_id)s, %(trigger_id)s, %(revision)s, %(task_id)s, %(task_revision)s,
     %(task_content_digest)s, %(spec_json)s, %(enabled)s, %(content_digest)s, %(created_at_ms)s);

-- name: trigger_ids_for_task
-- Triggers bound to a task and not deleted (for re-pinning after a task publish).
SELECT trigger_id FROM qinglong.triggers
WHERE project_id = %(project_id)s AND task_id = %(task_id)s AND deleted_at_ms IS NULL
ORDER BY trigger_id;

-- name: trigger_list
-- Current trigger revisions with their schedule rows and firing facts, in one project or all
-- (only the ones labelled %(label)s when it is given).
SELECT r.*,
       s.trigger_revision AS s_trigger_revision, s.next_fire_at_ms AS s_next_fire_at_ms,
       s.last_scheduled_at_ms AS s_last_scheduled_at_ms, s.state_version AS s_state_version,
       s.updated_at_ms AS s_updated_at_ms, s.claim_owner AS s_claim_owner,
       s.claim_version AS s_claim_version, s.claim_expires_at_ms AS s_claim_expires_at_ms,
       s.paused_from_ms AS s_paused_from_ms, s.paused_until_ms AS s_paused_until_ms,
       (SELECT z.reason FROM qinglong.trigger_pauses z
         WHERE z.project_id = h.project_id AND z.trigger_id = h.trigger_id
           AND z.paused_at_ms = s.paused_from_ms) AS pause_reason,
       (th.current_revision = r.task_revision) AS task_pin_current,
       (p.status = 'active') AS project_active,
       h.deleted_at_ms AS h_deleted_at_ms
FROM qinglong.triggers h
JOIN qinglong.trigger_revisions r
  ON r.project_id = h.project_id AND r.trigger_id = h.trigger_id AND r.revision = h.current_revision
JOIN qinglong.task_definitions th ON th.project_id = r.project_id AND th.task_id = r.task_id
JOIN qinglong.projects p ON p.id = h.project_id
LEFT JOIN qinglong.trigger_schedules s
  ON s.project_id = h.project_id AND s.trigger_id = h.trigger_id
WHERE (%(project_id)s::varchar IS NULL OR h.project_id = %(project_id)s::varchar)
  AND (%(trigger_id)s::varchar IS NULL OR h.trigger_id = %(trigger_id)s::varchar)
  AND (%(include_deleted)s::boolean OR h.deleted_at_ms IS NULL)
  AND (%(label)s::varchar IS NULL OR EXISTS (
         SELECT 1 FROM qinglong.trigger_labels l
          WHERE l.project_id = h.project_id AND l.trigger_id = h.trigger_id
            AND l.label = %(label)s::varchar))
ORDER BY h.project_id, h.trigger_id;

-- name: schedule_insert
-- A new trigger's schedule row: NULL cursor, no claim, versions 0.
INSERT INTO qinglong.trigger_schedules
    (project_id, trigger_id, trigger_revision, next_fire_at_ms, last_scheduled_at_ms,
     state_version, claim_owner, claim_token, claim_version, claim_expires_at_ms, updated_at_ms)
VALUES (%(project_id)s, %(trigger_id)s, %(trigger_revision)s, NULL, NULL, 0, NULL, NULL, 0, NULL,
        %(now_ms)s);

-- name: schedule_reset
-- A new revision: NULL cursor, claim cleared, both versions bumped (fences any claim in flight).
UPDATE qinglong.trigger_schedules
SET trigger_revision = %(trigger_revision)s, next_fire_at_ms = NULL, next_due_at_ms = NULL,
    last_scheduled_at_ms = NULL,
    state_version = state_version + 1, claim_owner = NULL, claim_token = NULL,
    claim_version = claim_version + 1, claim_expires_at_ms = NULL,
    updated_at_ms = greatest(updated_at_ms, %(now_ms)s)
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s;

-- name: trigger_head_restore
-- A publish brings a deleted trigger back.
UPDATE qinglong.triggers SET deleted_at_ms = NULL
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s;

-- name: trigger_pause_open
-- The trigger's pause in effect at %(now_ms)s (not resumed, its until not reached), if any.
SELECT paused_at_ms, until_ms, reason, paused_by FROM qinglong.trigger_pauses
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s AND resumed_at_ms IS NULL
  AND paused_at_ms <= %(now_ms)s AND (until_ms IS NULL OR until_ms > %(now_ms)s)
ORDER BY paused_at_ms DESC LIMIT 1;

-- name: trigger_pause_insert
-- A new pause on record.
INSERT INTO qinglong.trigger_pauses
    (project_id, trigger_id, paused_at_ms, until_ms, resumed_at_ms, reason, paused_by, resumed_by)
VALUES (%(project_id)s, %(trigger_id)s, %(now_ms)s, %(until_ms)s, NULL, %(reason)s, %(actor)s, NULL);

-- name: trigger_pause_amend
-- Pausing a paused trigger again changes when it ends and why.
UPDATE qinglong.trigger_pauses SET until_ms = %(until_ms)s, reason = %(reason)s
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s
  AND paused_at_ms = %(paused_at_ms)s AND resumed_at_ms IS NULL;

-- name: trigger_pause_end
-- A resume by hand: the pause ends now.
UPDATE qinglong.trigger_pauses SET resumed_at_ms = %(now_ms)s, resumed_by = %(actor)s
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s
  AND paused_at_ms = %(paused_at_ms)s AND resumed_at_ms IS NULL;

-- name: schedule_pause_set
-- The latest pause onto the schedule row; both versions bumped and any claim cleared, so a
-- decision in flight is fenced out (as a new revision does), the cursor kept.
UPDATE qinglong.trigger_schedules
SET paused_from_ms = %(paused_from_ms)s, paused_until_ms = %(paused_until_ms)s,
    state_version = state_version + 1, claim_owner = NULL, claim_token = NULL,
    claim_version = claim_version + 1, claim_expires_at_ms = NULL,
    updated_at_ms = greatest(updated_at_ms, %(now_ms)s)
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s;
