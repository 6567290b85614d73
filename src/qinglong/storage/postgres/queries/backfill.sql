-- Backfill (`ql trigger backfill`): the reads of a backfill (as ql_runtime), its plan in one
-- transaction and each admission inside its own SERIALIZABLE transaction. Every read is an
-- index lookup (the session sets enable_seqscan off, see manual_session), so its predicate
-- locks cover what it read: two backfills (or a backfill and a scheduler) reading the same
-- occurrence conflict, and one of them is retried and finds the other's Run. The
-- definitions are read with the queries of run now (manual_project_get,
-- manual_trigger_current, manual_task_current, manual_execution_revision); the rows are
-- written by run_insert, attempt_insert and events_insert, as for every admission.

-- name: backfill_schedule
-- A trigger's schedule row: the revision it serves and its cursor (NULL: nothing decided yet).
SELECT trigger_revision, next_fire_at_ms FROM qinglong.trigger_schedules
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s;

-- name: backfill_run_at
-- The Run standing for one occurrence of a trigger, scheduled (any revision) or backfilled.
SELECT id FROM qinglong.runs
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s
  AND scheduled_for_ms = %(scheduled_for_ms)s AND trigger_type IN ('cron', 'backfill')
ORDER BY id LIMIT 1;

-- name: backfill_runs_between
-- The occurrences in a window that have a Run standing for them, with one such Run each.
SELECT scheduled_for_ms, min(id) AS id FROM qinglong.runs
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s
  AND scheduled_for_ms BETWEEN %(from_ms)s AND %(to_ms)s
  AND trigger_type IN ('cron', 'backfill')
GROUP BY scheduled_for_ms;

-- name: backfill_run_by_key
-- The Run a backfill admitted for one occurrence, by its idempotency key.
SELECT id FROM qinglong.runs WHERE project_id = %(project_id)s AND idempotency_key = %(key)s;
