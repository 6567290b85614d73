-- Backfill (`ql trigger backfill`): the reads of a backfill, its plan in one read transaction
-- and each admission inside its own BEGIN IMMEDIATE transaction. The definitions are read
-- with the queries of run now (manual_project_get, manual_trigger_current,
-- manual_task_current, manual_execution_revision); the rows are written by run_insert,
-- attempt_insert and event_insert, as for every admission.

-- name: backfill_schedule
-- A trigger's schedule row: the revision it serves and its cursor (NULL: nothing decided yet).
SELECT trigger_revision, next_fire_at_ms FROM trigger_schedules
WHERE project_id = :project_id AND trigger_id = :trigger_id;

-- name: backfill_run_at
-- The Run standing for one occurrence of a trigger, scheduled (any revision) or backfilled.
SELECT id FROM runs
WHERE project_id = :project_id AND trigger_id = :trigger_id
  AND scheduled_for_ms = :scheduled_for_ms AND trigger_type IN ('cron', 'backfill')
ORDER BY id LIMIT 1;

-- name: backfill_runs_between
-- The occurrences in a window that have a Run standing for them, with one such Run each.
SELECT scheduled_for_ms, min(id) AS id FROM runs
WHERE project_id = :project_id AND trigger_id = :trigger_id
  AND scheduled_for_ms BETWEEN :from_ms AND :to_ms AND trigger_type IN ('cron', 'backfill')
GROUP BY scheduled_for_ms;

-- name: backfill_run_by_key
-- The Run a backfill admitted for one occurrence, by its idempotency key.
SELECT id FROM runs WHERE project_id = :project_id AND idempotency_key = :key;
