-- name: run_insert
-- Insert an admitted Run (status queued).
INSERT INTO runs
    (id, project_id, task_id, task_revision, task_name, task_snapshot_ref, trigger_id,
     trigger_revision, trigger_type, execution_origin, execution_owner, triggered_by,
     scheduled_for_ms, status, version, event_sequence, priority, idempotency_key,
     created_at_ms, queued_at_ms)
VALUES
    (:id, :project_id, :task_id, :task_revision, :task_name, :task_snapshot_ref, :trigger_id,
     :trigger_revision, :trigger_type, :execution_origin, :execution_owner, :triggered_by,
     :scheduled_for_ms, :status, :version, :event_sequence, :priority, :idempotency_key,
     :created_at_ms, :queued_at_ms);

-- name: attempt_insert
-- Insert a Run's first Attempt (status claimed).
INSERT INTO run_attempts (id, run_id, attempt, status, executor_type, callback_sequence, created_at_ms)
VALUES (:id, :run_id, :attempt, :status, :executor_type, :callback_sequence, :created_at_ms);

-- name: event_insert
-- Append one run event.
INSERT INTO run_events
    (id, run_id, sequence, type, dedupe_key, actor_type, actor_id, attempt_id, payload,
     created_at_ms)
VALUES
    (:id, :run_id, :sequence, :type, :dedupe_key, :actor_type, :actor_id, :attempt_id, :payload,
     :created_at_ms);

-- name: run_next_event_sequence
-- Reserve the next event sequence number of a Run.
UPDATE runs SET event_sequence = event_sequence + 1 WHERE id = :run_id RETURNING event_sequence;

-- name: run_step
-- Change a Run's status by compare-and-set on its current status.
UPDATE runs
SET status = :to_status, version = version + 1,
    started_at_ms = coalesce(:started_at_ms, started_at_ms),
    finished_at_ms = coalesce(:finished_at_ms, finished_at_ms),
    cancel_requested_at_ms = coalesce(:cancel_requested_at_ms, cancel_requested_at_ms),
    cancel_reason = coalesce(:cancel_reason, cancel_reason),
    error_code = coalesce(:error_code, error_code),
    error_summary = coalesce(:error_summary, error_summary)
WHERE id = :run_id AND status = :from_status
RETURNING version;

-- name: attempt_step
-- Change an Attempt's status by compare-and-set on its current status.
UPDATE run_attempts
SET status = :to_status,
    pid = coalesce(:pid, pid),
    executor_handle = coalesce(:executor_handle, executor_handle),
    log_path = coalesce(:log_path, log_path),
    started_at_ms = coalesce(:started_at_ms, started_at_ms),
    finished_at_ms = coalesce(:finished_at_ms, finished_at_ms),
    exit_code = coalesce(:exit_code, exit_code),
    error_code = coalesce(:error_code, error_code),
    error_summary = coalesce(:error_summary, error_summary)
WHERE id = :attempt_id AND run_id = :run_id AND status = :from_status;

-- name: run_list
-- Runs filtered by project, trigger and status; newest first unless oldest_first.
SELECT * FROM runs
WHERE (:project_id IS NULL OR project_id = :project_id)
  AND (:trigger_id IS NULL OR trigger_id = :trigger_id)
  AND (:status IS NULL OR status = :status)
ORDER BY
    CASE WHEN :oldest_first THEN coalesce(scheduled_for_ms, created_at_ms) END ASC,
    CASE WHEN :oldest_first THEN id END ASC,
    coalesce(scheduled_for_ms, created_at_ms) DESC, id DESC
LIMIT :limit;

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

-- name: run_list_queued
-- Queued Runs with their untouched first Attempt, oldest first.
SELECT r.id AS run_id, r.project_id, r.task_id, r.task_revision, r.trigger_id,
       r.scheduled_for_ms, a.id AS attempt_id, a.executor_type
FROM runs r
JOIN run_attempts a ON a.run_id = r.id AND a.status = 'claimed'
WHERE r.status = 'queued'
ORDER BY r.queued_at_ms, r.id
LIMIT :limit;

-- name: attempt_list_interrupted
-- Attempts a previous executor left starting or running (crash leftovers).
SELECT a.run_id, a.id AS attempt_id, a.status, a.pid, a.executor_handle
FROM run_attempts a
WHERE a.status IN ('starting', 'running') AND a.executor_type = 'local_process'
ORDER BY a.created_at_ms, a.id;
