-- name: lifecycle_run_get
-- A Run's lifecycle state (inside the step's write transaction).
SELECT id, status, version, event_sequence, attempts_spent,
       (cancel_requested_at_ms IS NOT NULL) AS cancel_requested, cancel_reason,
       project_id, task_id, task_revision
FROM runs WHERE id = :run_id;

-- name: lifecycle_attempt_get
-- An Attempt's lifecycle state and lease.
SELECT id, run_id, attempt, status, executor_type, worker_id, lease_generation,
       lease_token_digest, lease_expires_at_ms, pid, executor_handle
FROM run_attempts WHERE id = :attempt_id AND run_id = :run_id;

-- name: lease_candidates
-- Queued Runs whose newest Attempt is claimed and unleased, oldest first (for an executor of
-- one type). The Runs are read in runs_dispatch_idx order (migration 0011) and each one's
-- newest Attempt looked up by key, so the statement stops after `limit` Runs however deep
-- the queue is. The store's clock comes back with them, as on PostgreSQL, and the global
-- limit on Runs in progress (NULL: none). A Run that requires worker labels is taken only
-- when every one of its tokens is in :labels (a JSON array), as on PostgreSQL.
SELECT :now_ms AS now_ms,
       r.id AS run_id, r.status AS run_status, r.version, r.event_sequence, r.project_id,
       r.task_id, r.task_revision, r.trigger_id, r.scheduled_for_ms, r.queued_at_ms,
       r.attempts_spent, (r.cancel_requested_at_ms IS NOT NULL) AS cancel_requested, r.cancel_reason, r.overlap_policy, r.overlap_key, r.overlap_queue_limit,
       r.parameters,
       a.id AS attempt_id, a.attempt, a.status AS attempt_status, a.executor_type, a.worker_id,
       a.lease_generation, a.lease_token_digest, a.lease_expires_at_ms, a.pid, a.executor_handle,
       (SELECT max_running FROM concurrency_limits WHERE scope = 'global')
           AS global_max_running
FROM runs r INDEXED BY runs_dispatch_idx
JOIN run_attempts a
  ON a.id = (SELECT n.id FROM run_attempts n WHERE n.run_id = r.id
             ORDER BY n.attempt DESC LIMIT 1)
WHERE r.status = 'queued' AND r.cancel_requested_at_ms IS NULL
  AND a.status = 'claimed' AND a.lease_token_digest IS NULL
  AND a.executor_type = :executor_type
  AND (r.requires IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(r.requires) q
        WHERE q.value NOT IN (SELECT l.value FROM json_each(:labels) l)))
ORDER BY r.priority DESC, r.queued_at_ms, r.id
LIMIT :limit;

-- name: lease_renew
-- Extend the leases an owner still holds (one statement for all of them); the fences come as
-- a JSON array of {"attempt_id", "generation", "digest"}. An expired lease is not renewed:
-- once it has expired, the reconciler may already be withdrawing it.
UPDATE run_attempts
SET lease_expires_at_ms = :now_ms + :lease_ms
WHERE worker_id = :owner AND status IN ('claimed', 'starting', 'running')
  AND lease_expires_at_ms > :now_ms
  AND EXISTS (SELECT 1 FROM json_each(:fences) f
              WHERE json_extract(f.value, '$.attempt_id') = run_attempts.id
                AND json_extract(f.value, '$.generation') = run_attempts.lease_generation
                AND json_extract(f.value, '$.digest') = run_attempts.lease_token_digest)
RETURNING id, run_id, lease_expires_at_ms;

-- name: lease_cancel_requested
-- Which of these Runs (a JSON array of ids) someone asked to cancel.
SELECT id FROM runs
WHERE id IN (SELECT value FROM json_each(:run_ids)) AND cancel_requested_at_ms IS NOT NULL;

-- name: lease_expired
-- Attempts whose executor is presumed gone: a lease past its expiry by the grace (or every
-- active lease, when the caller knows no executor survives), and started attempts that never
-- had one (left by an older version).
SELECT r.id AS run_id, r.status AS run_status, r.version, r.event_sequence, r.project_id,
       r.task_id, r.task_revision, r.attempts_spent, (r.cancel_requested_at_ms IS NOT NULL) AS cancel_requested, r.cancel_reason, r.overlap_policy, r.overlap_key, r.overlap_queue_limit,
       a.id AS attempt_id, a.attempt, a.status AS attempt_status, a.executor_type, a.worker_id,
       a.lease_generation, a.lease_token_digest, a.lease_expires_at_ms, a.pid, a.executor_handle
FROM run_attempts a
JOIN runs r ON r.id = a.run_id
WHERE (a.status IN ('starting', 'running')
       OR (a.status = 'claimed' AND a.lease_token_digest IS NOT NULL))
  AND r.status IN ('dispatching', 'running')
  AND (:ignore_expiry OR coalesce(a.lease_expires_at_ms, 0) + :grace_ms <= :now_ms)
  AND (:executor_type IS NULL OR a.executor_type = :executor_type)
ORDER BY a.lease_expires_at_ms, a.id
LIMIT :limit;

-- name: attempt_list_active
-- Attempts that are leased or started, with the process they ran (if any).
SELECT a.run_id, a.id AS attempt_id, a.status, a.worker_id, a.pid, a.executor_handle,
       a.lease_expires_at_ms
FROM run_attempts a
WHERE a.status IN ('starting', 'running')
   OR (a.status = 'claimed' AND a.lease_token_digest IS NOT NULL)
ORDER BY a.created_at_ms, a.id;

-- name: retry_due
-- Runs whose retry wait is over, with their latest (ended) Attempt, oldest first.
SELECT r.id AS run_id, r.status AS run_status, r.version, r.event_sequence, r.project_id,
       r.task_id, r.task_revision, r.attempts_spent, (r.cancel_requested_at_ms IS NOT NULL) AS cancel_requested, r.cancel_reason, r.overlap_policy, r.overlap_key, r.overlap_queue_limit,
       a.id AS attempt_id, a.attempt, a.status AS attempt_status, a.executor_type, a.worker_id,
       a.lease_generation, a.lease_token_digest, a.lease_expires_at_ms, a.pid, a.executor_handle
FROM runs r
JOIN run_attempts a ON a.run_id = r.id
 AND a.attempt = (SELECT max(n.attempt) FROM run_attempts n WHERE n.run_id = r.id)
WHERE r.status = 'retry_wait' AND r.retry_at_ms <= :now_ms
ORDER BY r.retry_at_ms, r.id
LIMIT :limit;

-- name: run_latest_attempt
-- The latest Attempt of a Run (locked after the Run).
SELECT id, run_id, attempt, status, executor_type, worker_id, lease_generation,
       lease_token_digest, lease_expires_at_ms, pid, executor_handle
FROM run_attempts
WHERE run_id = :run_id
ORDER BY attempt DESC LIMIT 1;

-- name: run_plan_get
-- The execution revision a Run pinned (its retry policy, limits and command).
SELECT e.* FROM runs r
JOIN task_execution_revisions e
  ON e.project_id = r.project_id AND e.task_id = r.task_id AND e.task_revision = r.task_revision
WHERE r.id = :run_id AND e.executor_type = :executor_type;

-- name: overlap_active
-- Another Run of the same exclusive trigger that is in progress.
SELECT id, status FROM runs
WHERE project_id = :project_id AND overlap_key = :overlap_key
  AND status IN ('dispatching', 'running', 'retry_wait') AND id <> :run_id
LIMIT 1;

-- name: overlap_waiting_before
-- How many Runs of the same exclusive trigger wait in the queue ahead of this one.
SELECT count(*) AS waiting FROM runs
WHERE project_id = :project_id AND overlap_key = :overlap_key AND status = 'queued'
  AND (queued_at_ms < :queued_at_ms OR (queued_at_ms = :queued_at_ms AND id < :run_id));

-- name: task_active_count
-- Runs of one task being executed now.
SELECT count(*) AS active FROM runs
WHERE project_id = :project_id AND task_id = :task_id
  AND status IN ('dispatching', 'running');

-- name: global_active_count
-- Runs being executed now, anywhere, and the cluster-wide limit (NULL: none).
SELECT (SELECT count(*) FROM runs WHERE status IN ('dispatching', 'running')) AS active,
       (SELECT max_running FROM concurrency_limits WHERE scope = 'global') AS max_running;

-- name: concurrency_lock
-- One writer at a time already (BEGIN IMMEDIATE): nothing more to lock.
SELECT 1 AS locked;

-- name: reconcile_pending
-- Could a reconciler cycle do anything now? pending: the conditions of lease_expired
-- (without ignore_expiry) and retry_due, "false" meaning both would find nothing;
-- flows_overdue: those of flow_runs_overdue.
SELECT EXISTS (
           SELECT 1 FROM run_attempts a
           JOIN runs r ON r.id = a.run_id
           WHERE (a.status IN ('starting', 'running')
                  OR (a.status = 'claimed' AND a.lease_token_digest IS NOT NULL))
             AND r.status IN ('dispatching', 'running')
             AND coalesce(a.lease_expires_at_ms, 0) + :grace_ms <= :now_ms)
       OR EXISTS (
           SELECT 1 FROM runs r WHERE r.status = 'retry_wait' AND r.retry_at_ms <= :now_ms)
       AS pending,
       EXISTS (
           SELECT 1 FROM flow_runs f
           WHERE f.status = 'running' AND f.deadline_at_ms IS NOT NULL
             AND f.deadline_at_ms <= :now_ms)
       AS flows_overdue;

-- name: lifecycle_steps_get
-- The lifecycle state of several Runs and Attempts (JSON arrays of their ids), in Run id
-- order: the batched form of lifecycle_run_get and lifecycle_attempt_get. The store's clock
-- comes back with them, as on PostgreSQL, and the trigger type (which Runs can be flow
-- steps).
SELECT :now_ms AS now_ms,
       r.id AS run_id, r.status AS run_status, r.version, r.event_sequence, r.attempts_spent,
       (r.cancel_requested_at_ms IS NOT NULL) AS cancel_requested, r.cancel_reason,
       r.project_id, r.task_id, r.task_revision, r.trigger_type,
       a.id AS attempt_id, a.attempt, a.status AS attempt_status, a.executor_type, a.worker_id,
       a.lease_generation, a.lease_token_digest, a.lease_expires_at_ms, a.pid, a.executor_handle
FROM run_attempts a
JOIN runs r ON r.id = a.run_id
WHERE a.id IN (SELECT value FROM json_each(:attempt_ids))
  AND r.id IN (SELECT value FROM json_each(:run_ids))
ORDER BY r.id;

-- name: lifecycle_runs_update
-- Apply planned steps to their Runs in one statement (a JSON array, one object per Run: the
-- new status, the event count and each column a step may set with its set_* flag; fields not
-- flagged are kept, and started_at_ms keeps the first attempt's start once set, so a retried
-- Run lasts from its first attempt's start to its last attempt's end): compare-and-set on
-- each version; the ids of the Runs updated come back, so a row that moved is noticed.
WITH c AS (
    SELECT json_extract(value, '$.run_id') AS run_id,
           json_extract(value, '$.expected_version') AS expected_version,
           json_extract(value, '$.status') AS status,
           json_extract(value, '$.event_count') AS event_count,
           json_extract(value, '$.set_started_at_ms') AS set_started_at_ms,
           json_extract(value, '$.started_at_ms') AS started_at_ms,
           json_extract(value, '$.set_finished_at_ms') AS set_finished_at_ms,
           json_extract(value, '$.finished_at_ms') AS finished_at_ms,
           json_extract(value, '$.set_cancel_requested_at_ms') AS set_cancel_requested_at_ms,
           json_extract(value, '$.cancel_requested_at_ms') AS cancel_requested_at_ms,
           json_extract(value, '$.set_cancel_reason') AS set_cancel_reason,
           json_extract(value, '$.cancel_reason') AS cancel_reason,
           json_extract(value, '$.set_error_code') AS set_error_code,
           json_extract(value, '$.error_code') AS error_code,
           json_extract(value, '$.set_error_summary') AS set_error_summary,
           json_extract(value, '$.error_summary') AS error_summary,
           json_extract(value, '$.set_retry_at_ms') AS set_retry_at_ms,
           json_extract(value, '$.retry_at_ms') AS retry_at_ms,
           json_extract(value, '$.set_attempts_spent') AS set_attempts_spent,
           json_extract(value, '$.attempts_spent') AS attempts_spent,
           json_extract(value, '$.set_queued_at_ms') AS set_queued_at_ms,
           json_extract(value, '$.queued_at_ms') AS queued_at_ms
    FROM json_each(:changes)
)
UPDATE runs
SET status = c.status,
    version = runs.version + 1,
    event_sequence = runs.event_sequence + c.event_count,
    started_at_ms = CASE WHEN c.set_started_at_ms THEN coalesce(runs.started_at_ms, c.started_at_ms)
                         ELSE runs.started_at_ms END,
    finished_at_ms = CASE WHEN c.set_finished_at_ms THEN c.finished_at_ms
                          ELSE runs.finished_at_ms END,
    cancel_requested_at_ms = CASE WHEN c.set_cancel_requested_at_ms THEN c.cancel_requested_at_ms
                                  ELSE runs.cancel_requested_at_ms END,
    cancel_reason = CASE WHEN c.set_cancel_reason THEN c.cancel_reason ELSE runs.cancel_reason END,
    error_code = CASE WHEN c.set_error_code THEN c.error_code ELSE runs.error_code END,
    error_summary = CASE WHEN c.set_error_summary THEN c.error_summary ELSE runs.error_summary END,
    retry_at_ms = CASE WHEN c.set_retry_at_ms THEN c.retry_at_ms ELSE runs.retry_at_ms END,
    attempts_spent = CASE WHEN c.set_attempts_spent THEN c.attempts_spent
                          ELSE runs.attempts_spent END,
    queued_at_ms = CASE WHEN c.set_queued_at_ms THEN c.queued_at_ms ELSE runs.queued_at_ms END
FROM c
WHERE runs.id = c.run_id AND runs.version = c.expected_version
RETURNING runs.id;

-- name: lifecycle_attempts_update
-- Apply planned steps to their Attempts in one statement (a JSON array, one object per
-- Attempt, with the columns a step may set and their set_* flags): compare-and-set on
-- each one's status and lease generation; the ids updated come back.
WITH c AS (
    SELECT json_extract(value, '$.run_id') AS run_id,
           json_extract(value, '$.attempt_id') AS attempt_id,
           json_extract(value, '$.expected_status') AS expected_status,
           json_extract(value, '$.expected_generation') AS expected_generation,
           json_extract(value, '$.status') AS status,
           json_extract(value, '$.generation') AS generation,
           json_extract(value, '$.set_worker_id') AS set_worker_id,
           json_extract(value, '$.worker_id') AS worker_id,
           json_extract(value, '$.set_lease_token_digest') AS set_lease_token_digest,
           json_extract(value, '$.lease_token_digest') AS lease_token_digest,
           json_extract(value, '$.set_lease_expires_at_ms') AS set_lease_expires_at_ms,
           json_extract(value, '$.lease_expires_at_ms') AS lease_expires_at_ms,
           json_extract(value, '$.set_pid') AS set_pid,
           json_extract(value, '$.pid') AS pid,
           json_extract(value, '$.set_executor_handle') AS set_executor_handle,
           json_extract(value, '$.executor_handle') AS executor_handle,
           json_extract(value, '$.set_log_path') AS set_log_path,
           json_extract(value, '$.log_path') AS log_path,
           json_extract(value, '$.set_started_at_ms') AS set_started_at_ms,
           json_extract(value, '$.started_at_ms') AS started_at_ms,
           json_extract(value, '$.set_finished_at_ms') AS set_finished_at_ms,
           json_extract(value, '$.finished_at_ms') AS finished_at_ms,
           json_extract(value, '$.set_exit_code') AS set_exit_code,
           json_extract(value, '$.exit_code') AS exit_code,
           json_extract(value, '$.set_error_code') AS set_error_code,
           json_extract(value, '$.error_code') AS error_code,
           json_extract(value, '$.set_error_summary') AS set_error_summary,
           json_extract(value, '$.error_summary') AS error_summary
    FROM json_each(:changes)
)
UPDATE run_attempts
SET status = c.status,
    lease_generation = c.generation,
    worker_id = CASE WHEN c.set_worker_id THEN c.worker_id ELSE run_attempts.worker_id END,
    lease_token_digest = CASE WHEN c.set_lease_token_digest THEN c.lease_token_digest
                              ELSE run_attempts.lease_token_digest END,
    lease_expires_at_ms = CASE WHEN c.set_lease_expires_at_ms THEN c.lease_expires_at_ms
                               ELSE run_attempts.lease_expires_at_ms END,
    pid = CASE WHEN c.set_pid THEN c.pid ELSE run_attempts.pid END,
    executor_handle = CASE WHEN c.set_executor_handle THEN c.executor_handle
                           ELSE run_attempts.executor_handle END,
    log_path = CASE WHEN c.set_log_path THEN c.log_path ELSE run_attempts.log_path END,
    started_at_ms = CASE WHEN c.set_started_at_ms THEN c.started_at_ms
                         ELSE run_attempts.started_at_ms END,
    finished_at_ms = CASE WHEN c.set_finished_at_ms THEN c.finished_at_ms
                          ELSE run_attempts.finished_at_ms END,
    exit_code = CASE WHEN c.set_exit_code THEN c.exit_code ELSE run_attempts.exit_code END,
    error_code = CASE WHEN c.set_error_code THEN c.error_code ELSE run_attempts.error_code END,
    error_summary = CASE WHEN c.set_error_summary THEN c.error_summary
                         ELSE run_attempts.error_summary END
FROM c
WHERE run_attempts.id = c.attempt_id AND run_attempts.run_id = c.run_id
  AND run_attempts.status = c.expected_status
  AND run_attempts.lease_generation = c.expected_generation
RETURNING run_attempts.id;

-- name: event_insert
-- Append one event (the run_events columns; payload as JSON text). Run once per event with
-- executemany: cheaper here than unpacking a JSON array, whose every field is parsed again.
INSERT INTO run_events
    (id, run_id, sequence, type, dedupe_key, actor_type, actor_id, attempt_id, payload,
     created_at_ms)
VALUES (:id, :run_id, :sequence, :type, :dedupe_key, :actor_type, :actor_id, :attempt_id,
        :payload, :created_at_ms);
