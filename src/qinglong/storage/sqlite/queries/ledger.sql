-- The occurrence ledger of one trigger (`ql trigger ledger`): every fact that decides the
-- fate of its nominal occurrences in a window, read in one transaction. Names start with
-- ledger_ (all query names share one namespace).

-- name: ledger_trigger_get
-- The trigger's head (also when it is deleted: its history stays readable).
SELECT task_id, deleted_at_ms FROM triggers
WHERE project_id = :project_id AND trigger_id = :trigger_id;

-- name: ledger_trigger_revisions
-- Every revision of the trigger, whole (each is digest-verified when read).
SELECT * FROM trigger_revisions
WHERE project_id = :project_id AND trigger_id = :trigger_id
ORDER BY revision;

-- name: ledger_task_revisions
-- The revisions of the trigger's task (one after the pinned revision makes the pin stale).
SELECT revision, enabled, created_at_ms FROM task_definition_revisions
WHERE project_id = :project_id AND task_id = :task_id
ORDER BY revision;

-- name: ledger_runs
-- Runs standing for occurrences in the window (a manual Run stands for none), at most
-- the limit given (the caller refuses a window holding more).
SELECT id, scheduled_for_ms, status, trigger_type, trigger_revision FROM runs
WHERE project_id = :project_id AND trigger_id = :trigger_id
  AND scheduled_for_ms BETWEEN :from_ms AND :to_ms AND trigger_type <> 'manual'
ORDER BY scheduled_for_ms, id
LIMIT :limit;

-- name: ledger_misfires
-- Decisions that dropped or held back occurrences in the window (at most the limit given).
SELECT trigger_revision, due_at_ms, skipped_through_ms, policy, decided_at_ms
FROM trigger_schedule_misfires
WHERE project_id = :project_id AND trigger_id = :trigger_id
  AND due_at_ms <= :to_ms AND skipped_through_ms >= :from_ms
ORDER BY due_at_ms
LIMIT :limit;

-- name: ledger_pauses
-- Every pause of the trigger and when it ended (resumed by hand, or its until reached;
-- NULL while it lasts until a resume).
SELECT paused_at_ms,
       CASE WHEN resumed_at_ms IS NOT NULL AND (until_ms IS NULL OR resumed_at_ms < until_ms)
            THEN resumed_at_ms ELSE until_ms END AS ended_at_ms
FROM trigger_pauses
WHERE project_id = :project_id AND trigger_id = :trigger_id
ORDER BY paused_at_ms;

-- name: ledger_archivals
-- When the trigger's project was archived and restored.
SELECT archived_at_ms, restored_at_ms FROM project_archivals
WHERE project_id = :project_id
ORDER BY archived_at_ms;

-- name: ledger_schedule
-- The trigger's schedule row: the revision it serves and its cursor.
SELECT trigger_revision, next_fire_at_ms FROM trigger_schedules
WHERE project_id = :project_id AND trigger_id = :trigger_id;
