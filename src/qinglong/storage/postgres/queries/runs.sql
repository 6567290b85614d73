-- name: run_insert
-- Insert an admitted Run (status queued).
INSERT INTO qinglong.runs
    (id, project_id, task_id, task_revision, task_name, task_snapshot_ref, trigger_id,
     trigger_revision, trigger_type, execution_origin, execution_owner, triggered_by,
     scheduled_for_ms, status, version, event_sequence, priority, idempotency_key,
     created_at_ms, queued_at_ms, overlap_policy, overlap_key, overlap_queue_limit, requires,
     parameters)
VALUES
    (%(id)s, %(project_id)s, %(task_id)s, %(task_revision)s, %(task_name)s, %(task_snapshot_ref)s,
     %(trigger_id)s, %(trigger_revision)s, %(trigger_type)s, %(execution_origin)s,
     %(execution_owner)s, %(triggered_by)s, %(scheduled_for_ms)s, %(status)s, %(version)s,
     %(event_sequence)s, %(priority)s, %(idempotency_key)s, %(created_at_ms)s, %(queued_at_ms)s,
     %(overlap_policy)s, %(overlap_key)s, %(overlap_queue_limit)s, %(requires)s::jsonb,
     %(parameters)s::jsonb);

-- name: attempt_insert
-- Insert a Run's first Attempt (status claimed, every execution field NULL).
INSERT INTO qinglong.run_attempts
    (id, run_id, attempt, status, executor_type, callback_sequence, created_at_ms)
VALUES (%(id)s, %(run_id)s, %(attempt)s, %(status)s, %(executor_type)s, %(callback_sequence)s,
        %(created_at_ms)s);

-- name: run_get
-- One Run by id.
SELECT * FROM qinglong.runs WHERE id = %(run_id)s;

-- name: run_find_by_prefix
-- Runs whose id starts with a prefix (short ids on the command line).
SELECT id FROM qinglong.runs WHERE id LIKE %(prefix)s || '%%' ORDER BY id LIMIT 2;

-- name: attempt_list_for_run
-- A Run's attempts in order.
SELECT * FROM qinglong.run_attempts WHERE run_id = %(run_id)s ORDER BY attempt;

-- name: event_list_for_run
-- A Run's events in order.
SELECT * FROM qinglong.run_events WHERE run_id = %(run_id)s ORDER BY sequence;
