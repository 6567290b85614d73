-- name: run_insert
-- Insert an admitted Run (status queued).
INSERT INTO runs
    (id, project_id, task_id, task_revision, task_name, task_snapshot_ref, trigger_id,
     trigger_revision, trigger_type, execution_origin, execution_owner, triggered_by,
     scheduled_for_ms, status, version, event_sequence, priority, idempotency_key,
     created_at_ms, queued_at_ms, overlap_policy, overlap_key, overlap_queue_limit, requires,
     parameters)
VALUES
    (:id, :project_id, :task_id, :task_revision, :task_name, :task_snapshot_ref, :trigger_id,
     :trigger_revision, :trigger_type, :execution_origin, :execution_owner, :triggered_by,
     :scheduled_for_ms, :status, :version, :event_sequence, :priority, :idempotency_key,
     :created_at_ms, :queued_at_ms, :overlap_policy, :overlap_key, :overlap_queue_limit,
     :requires, :parameters);

-- name: attempt_insert
-- Insert a Run's first Attempt (status claimed).
INSERT INTO run_attempts (id, run_id, attempt, status, executor_type, callback_sequence, created_at_ms)
VALUES (:id, :run_id, :attempt, :status, :executor_type, :callback_sequence, :created_at_ms);

-- name: run_get
-- One Run by id.
SELECT * FROM runs WHERE id = :run_id;

-- name: run_find_by_prefix
-- Runs whose id starts with a prefix (for short ids on the command line).
SELECT id FROM runs WHERE id LIKE :prefix || '%' ORDER BY id LIMIT 2;

-- name: attempt_list_for_run
-- A Run's attempts in order.
SELECT * FROM run_attempts WHERE run_id = :run_id ORDER BY attempt;

-- name: event_list_for_run
-- A Run's events in order.
SELECT * FROM run_events WHERE run_id = :run_id ORDER BY sequence;
