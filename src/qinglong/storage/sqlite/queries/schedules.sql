-- name: schedule_list_due
-- Due or uninitialised schedule rows whose trigger can fire, oldest cursor first (due: the
-- cursor has come, and with jitter its jittered instant too).
SELECT s.project_id, s.trigger_id, s.trigger_revision, s.next_fire_at_ms, s.state_version,
       s.paused_from_ms, s.paused_until_ms,
       tr.revision AS t_revision, tr.task_id AS t_task_id, tr.task_revision AS t_task_revision,
       tr.task_content_digest AS t_task_content_digest, tr.spec_json AS t_spec_json,
       tr.enabled AS t_enabled, tr.content_digest AS t_content_digest,
       tr.created_at_ms AS t_created_at_ms
FROM trigger_schedules s
JOIN triggers h
  ON h.project_id = s.project_id AND h.trigger_id = s.trigger_id
 AND h.current_revision = s.trigger_revision
JOIN trigger_revisions tr
  ON tr.project_id = s.project_id AND tr.trigger_id = s.trigger_id
 AND tr.revision = s.trigger_revision
JOIN task_definitions th
  ON th.project_id = tr.project_id AND th.task_id = tr.task_id
 AND th.current_revision = tr.task_revision
JOIN task_definition_revisions kr
  ON kr.project_id = tr.project_id AND kr.task_id = tr.task_id AND kr.revision = tr.task_revision
 AND kr.content_digest = tr.task_content_digest
JOIN projects p ON p.id = s.project_id
WHERE (s.next_fire_at_ms IS NULL OR s.next_fire_at_ms <= :now_ms)
  AND (s.next_due_at_ms IS NULL OR s.next_due_at_ms <= :now_ms)
  AND (s.paused_from_ms IS NULL OR s.paused_until_ms <= :now_ms)
  AND p.status = 'active' AND tr.enabled = 1 AND kr.enabled = 1
ORDER BY s.next_fire_at_ms, s.project_id, s.trigger_id
LIMIT :limit;

-- name: schedule_get_for_commit
-- Re-read one schedule row with every fact its decision used (inside the admission tx).
SELECT s.project_id, s.trigger_id, s.trigger_revision, s.next_fire_at_ms, s.state_version,
       s.paused_from_ms, s.paused_until_ms,
       tr.revision AS t_revision, tr.task_id AS t_task_id, tr.task_revision AS t_task_revision,
       tr.task_content_digest AS t_task_content_digest, tr.spec_json AS t_spec_json,
       tr.enabled AS t_enabled, tr.content_digest AS t_content_digest,
       tr.created_at_ms AS t_created_at_ms,
       kr.revision AS k_revision, kr.name AS k_name, kr.kind AS k_kind,
       kr.spec_json AS k_spec_json, kr.enabled AS k_enabled,
       kr.content_digest AS k_content_digest, kr.created_at_ms AS k_created_at_ms
FROM trigger_schedules s
JOIN triggers h
  ON h.project_id = s.project_id AND h.trigger_id = s.trigger_id
 AND h.current_revision = s.trigger_revision
JOIN trigger_revisions tr
  ON tr.project_id = s.project_id AND tr.trigger_id = s.trigger_id
 AND tr.revision = s.trigger_revision
JOIN task_definitions th
  ON th.project_id = tr.project_id AND th.task_id = tr.task_id
 AND th.current_revision = tr.task_revision
JOIN task_definition_revisions kr
  ON kr.project_id = tr.project_id AND kr.task_id = tr.task_id AND kr.revision = tr.task_revision
JOIN projects p ON p.id = s.project_id
WHERE s.project_id = :project_id AND s.trigger_id = :trigger_id
  AND p.status = 'active' AND tr.enabled = 1 AND kr.enabled = 1;

-- name: schedule_advance
-- Move the cursor by compare-and-set on revision, state version and the cursor itself.
UPDATE trigger_schedules
SET next_fire_at_ms = :next_fire_at_ms,
    next_due_at_ms = :next_due_at_ms,
    last_scheduled_at_ms = coalesce(:scheduled_for_ms, last_scheduled_at_ms),
    state_version = state_version + 1,
    updated_at_ms = max(updated_at_ms, :now_ms)
WHERE project_id = :project_id AND trigger_id = :trigger_id
  AND trigger_revision = :trigger_revision AND state_version = :state_version
  AND next_fire_at_ms IS :cursor_ms;

-- name: schedule_next_due_at
-- The earliest future cursor, jittered instant or end of a timed pause (a wake-up hint for the
-- cadence); a
-- finished schedule's cursor (:done_cursor_ms, see domain/occurrences.py) is no due time.
SELECT min(at_ms) AS next_due_at_ms FROM (
    SELECT min(next_fire_at_ms) AS at_ms FROM trigger_schedules
    WHERE next_fire_at_ms > :after_ms AND next_fire_at_ms < :done_cursor_ms
    UNION ALL
    SELECT min(next_due_at_ms) FROM trigger_schedules WHERE next_due_at_ms > :after_ms
    UNION ALL
    SELECT min(paused_until_ms) FROM trigger_schedules WHERE paused_until_ms > :after_ms
);

-- name: schedule_misfire_insert
-- Record the stretch of occurrences a misfire decision dropped (or a pause held back).
INSERT INTO trigger_schedule_misfires
    (project_id, trigger_id, trigger_revision, due_at_ms, skipped_through_ms, next_fire_at_ms,
     policy, run_id, decided_at_ms)
VALUES
    (:project_id, :trigger_id, :trigger_revision, :due_at_ms, :skipped_through_ms,
     :next_fire_at_ms, :policy, :run_id, :decided_at_ms);
