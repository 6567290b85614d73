-- name: lifecycle_run_get
-- A Run's lifecycle state, locked: the Run row is the mutex of its lifecycle (every step
-- locks it first, then its Attempt).
SELECT id, status, version, event_sequence, attempts_spent,
       (cancel_requested_at_ms IS NOT NULL) AS cancel_requested, cancel_reason,
       project_id, task_id, task_revision
FROM qinglong.runs WHERE id = %(run_id)s FOR UPDATE;

-- name: lifecycle_attempt_get
-- An Attempt's lifecycle state and lease, locked after its Run.
SELECT id, run_id, attempt, status, executor_type, worker_id, lease_generation,
       lease_token_digest, lease_expires_at_ms, pid, executor_handle
FROM qinglong.run_attempts WHERE id = %(attempt_id)s AND run_id = %(run_id)s FOR UPDATE;

-- name: lease_candidates
-- Queued Runs whose newest Attempt is claimed and unleased, oldest first, for an executor of
-- one type; the Runs are locked, and Runs another executor is taking are skipped. The Runs
-- are read in runs_dispatch_idx order and each one's newest Attempt looked up by key, so
-- the statement stops after `limit` Runs however deep the queue is (a join of every queued
-- Run with its Attempts, sorted, cost a read of the whole queue per lease). The database's
-- clock comes with them (SKIP LOCKED never waits): the leases granted expire from it; and
-- the cluster-wide limit on Runs in progress (NULL: none). A Run that requires worker labels
-- is taken only when every one of its tokens is among %(labels)s (a JSON array of the
-- tokens the leasing worker's labels meet, domain/placement.py); the others are passed over
-- unlocked, so they never hold up the Runs behind them.
SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms,
       r.id AS run_id, r.status AS run_status, r.version, r.event_sequence, r.project_id,
       r.task_id, r.task_revision, r.trigger_id, r.scheduled_for_ms, r.queued_at_ms,
       r.attempts_spent, (r.cancel_requested_at_ms IS NOT NULL) AS cancel_requested, r.cancel_reason, r.overlap_policy, r.overlap_key, r.overlap_queue_limit,
       r.parameters::text AS parameters,
       a.id AS attempt_id, a.attempt, a.status AS attempt_status, a.executor_type, a.worker_id,
       a.lease_generation, a.lease_token_digest, a.lease_expires_at_ms, a.pid, a.executor_handle,
       (SELECT max_running FROM qinglong.concurrency_limits WHERE scope = 'global')
           AS global_max_running
FROM qinglong.runs r
CROSS JOIN LATERAL (
    SELECT n.* FROM qinglong.run_attempts n WHERE n.run_id = r.id
    ORDER BY n.attempt DESC LIMIT 1
) a
WHERE r.status = 'queued' AND r.cancel_requested_at_ms IS NULL
  AND a.status = 'claimed' AND a.lease_token_digest IS NULL
  AND a.executor_type = %(executor_type)s
  AND (r.requires IS NULL OR r.requires <@ %(labels)s::jsonb)
ORDER BY r.priority DESC, r.queued_at_ms, r.id
LIMIT %(limit)s
FOR UPDATE OF r SKIP LOCKED;

-- name: lease_renew_lock
-- Before renewing, lock the Runs of the leases in id order: every lifecycle step locks a Run
-- before its Attempt, and renewal follows the same order so it never deadlocks with a rescue.
SELECT r.id FROM qinglong.runs r
WHERE r.id IN (SELECT a.run_id FROM qinglong.run_attempts a
               WHERE a.id IN (SELECT f->>'attempt_id' FROM jsonb_array_elements(%(fences)s::jsonb) f))
ORDER BY r.id
FOR UPDATE OF r;

-- name: lease_renew
-- Extend the leases an owner still holds, in one statement, at database time; the fences come
-- as a JSON array of {"attempt_id", "generation", "digest"}. An expired lease is not renewed:
-- once it has expired, the reconciler may already be withdrawing it.
WITH observed AS MATERIALIZED (
    SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms
),
held AS (
    SELECT * FROM jsonb_to_recordset(%(fences)s::jsonb)
        AS f(attempt_id varchar, generation integer, digest varchar)
)
UPDATE qinglong.run_attempts a
SET lease_expires_at_ms = o.now_ms + %(lease_ms)s
FROM held f, observed o
WHERE a.id = f.attempt_id AND a.lease_generation = f.generation
  AND a.lease_token_digest = f.digest AND a.worker_id = %(owner)s
  AND a.status IN ('claimed', 'starting', 'running')
  AND a.lease_expires_at_ms > o.now_ms
RETURNING a.id, a.run_id, a.lease_expires_at_ms;

-- name: lease_cancel_requested
-- Which of these Runs (a JSON array of ids) someone asked to cancel.
SELECT id FROM qinglong.runs
WHERE id IN (SELECT jsonb_array_elements_text(%(run_ids)s::jsonb))
  AND cancel_requested_at_ms IS NOT NULL;

-- name: lease_expired
-- Attempts whose executor is presumed gone: a lease past its expiry (database time) by the
-- grace, or every active lease when the caller knows no executor survives. The Runs and the
-- Attempts are both locked (so a renewal that committed meanwhile is seen and the row
-- dropped); rows another transaction holds are skipped.
SELECT r.id AS run_id, r.status AS run_status, r.version, r.event_sequence, r.project_id,
       r.task_id, r.task_revision, r.attempts_spent, (r.cancel_requested_at_ms IS NOT NULL) AS cancel_requested, r.cancel_reason, r.overlap_policy, r.overlap_key, r.overlap_queue_limit,
       a.id AS attempt_id, a.attempt, a.status AS attempt_status, a.executor_type, a.worker_id,
       a.lease_generation, a.lease_token_digest, a.lease_expires_at_ms, a.pid, a.executor_handle
FROM qinglong.run_attempts a
JOIN qinglong.runs r ON r.id = a.run_id
WHERE a.status IN ('claimed', 'starting', 'running')
  AND r.status IN ('dispatching', 'running')
  AND (a.status <> 'claimed' OR a.lease_token_digest IS NOT NULL)
  AND (%(ignore_expiry)s::boolean
       OR coalesce(a.lease_expires_at_ms, 0) + %(grace_ms)s <= %(now_ms)s)
  AND (%(executor_type)s::varchar IS NULL OR a.executor_type = %(executor_type)s::varchar)
ORDER BY a.lease_expires_at_ms, a.id
LIMIT %(limit)s
FOR UPDATE OF r, a SKIP LOCKED;

-- name: attempt_list_active
-- Attempts that are leased or started, with the process they ran (if any).
SELECT a.run_id, a.id AS attempt_id, a.status, a.worker_id, a.pid, a.executor_handle,
       a.lease_expires_at_ms
FROM qinglong.run_attempts a
WHERE a.status IN ('claimed', 'starting', 'running')
  AND (a.status <> 'claimed' OR a.lease_token_digest IS NOT NULL)
ORDER BY a.created_at_ms, a.id;

-- name: task_execution_revision_get
-- The execution revision a Run pinned, by its qltd:v1 reference.
SELECT * FROM qinglong.task_execution_revisions
WHERE project_id = %(project_id)s AND task_id = %(task_id)s AND task_revision = %(task_revision)s
  AND executor_type = %(executor_type)s;

-- name: lifecycle_corrupt
-- Runs and Attempts in a shape no sequence of lifecycle steps can produce. Expired leases are
-- not listed: they are normal work for the reconciler. Only these block activation.
SELECT r.id AS run_id, r.status, 'no-attempt' AS problem
FROM qinglong.runs r
WHERE NOT EXISTS (SELECT 1 FROM qinglong.run_attempts a WHERE a.run_id = r.id)
UNION ALL
SELECT r.id, r.status, 'queued-with-a-busy-attempt'
FROM qinglong.runs r JOIN qinglong.run_attempts a ON a.run_id = r.id
WHERE r.status = 'queued'
  AND (a.status IN ('starting', 'running')
       OR (a.status = 'claimed' AND a.lease_token_digest IS NOT NULL))
UNION ALL
SELECT r.id, r.status, 'executing-without-a-leased-attempt'
FROM qinglong.runs r
WHERE r.status IN ('dispatching', 'running')
  AND NOT EXISTS (SELECT 1 FROM qinglong.run_attempts a
                  WHERE a.run_id = r.id AND a.lease_token_digest IS NOT NULL
                    AND a.status IN ('claimed', 'starting', 'running'))
UNION ALL
SELECT r.id, r.status, 'ended-with-an-active-attempt'
FROM qinglong.runs r JOIN qinglong.run_attempts a ON a.run_id = r.id
WHERE r.status IN ('succeeded', 'failed', 'cancelled', 'timed_out', 'lost')
  AND a.status IN ('starting', 'running')
LIMIT %(limit)s;

-- name: retry_due
-- Runs whose retry wait is over, with their latest (ended) Attempt, oldest first.
SELECT r.id AS run_id, r.status AS run_status, r.version, r.event_sequence, r.project_id,
       r.task_id, r.task_revision, r.attempts_spent, (r.cancel_requested_at_ms IS NOT NULL) AS cancel_requested, r.cancel_reason, r.overlap_policy, r.overlap_key, r.overlap_queue_limit,
       a.id AS attempt_id, a.attempt, a.status AS attempt_status, a.executor_type, a.worker_id,
       a.lease_generation, a.lease_token_digest, a.lease_expires_at_ms, a.pid, a.executor_handle
FROM qinglong.runs r
JOIN qinglong.run_attempts a ON a.run_id = r.id
 AND a.attempt = (SELECT max(n.attempt) FROM qinglong.run_attempts n WHERE n.run_id = r.id)
WHERE r.status = 'retry_wait' AND r.retry_at_ms <= %(now_ms)s
ORDER BY r.retry_at_ms, r.id
LIMIT %(limit)s
FOR UPDATE OF r SKIP LOCKED;

-- name: run_latest_attempt
-- The latest Attempt of a Run (locked after the Run).
SELECT id, run_id, attempt, status, executor_type, worker_id, lease_generation,
       lease_token_digest, lease_expires_at_ms, pid, executor_handle
FROM qinglong.run_attempts
WHERE run_id = %(run_id)s
ORDER BY attempt DESC LIMIT 1 FOR UPDATE;

-- name: run_plan_get
-- The execution revision a Run pinned (its retry policy, limits and command).
SELECT e.* FROM qinglong.runs r
JOIN qinglong.task_execution_revisions e
  ON e.project_id = r.project_id AND e.task_id = r.task_id AND e.task_revision = r.task_revision
WHERE r.id = %(run_id)s AND e.executor_type = %(executor_type)s;

-- name: overlap_active
-- Another Run of the same exclusive trigger that is in progress.
SELECT id, status FROM qinglong.runs
WHERE project_id = %(project_id)s AND overlap_key = %(overlap_key)s
  AND status IN ('dispatching', 'running', 'retry_wait') AND id <> %(run_id)s
LIMIT 1;

-- name: overlap_waiting_before
-- How many Runs of the same exclusive trigger wait in the queue ahead of this one.
SELECT count(*) AS waiting FROM qinglong.runs
WHERE project_id = %(project_id)s AND overlap_key = %(overlap_key)s AND status = 'queued'
  AND (queued_at_ms < %(queued_at_ms)s OR (queued_at_ms = %(queued_at_ms)s AND id < %(run_id)s));

-- name: task_active_count
-- Runs of one task being executed now.
SELECT count(*) AS active FROM qinglong.runs
WHERE project_id = %(project_id)s AND task_id = %(task_id)s
  AND status IN ('dispatching', 'running');

-- name: global_active_count
-- Runs being executed now, anywhere, and the cluster-wide limit (NULL: none).
SELECT (SELECT count(*) FROM qinglong.runs WHERE status IN ('dispatching', 'running')) AS active,
       (SELECT max_running FROM qinglong.concurrency_limits WHERE scope = 'global') AS max_running;

-- name: concurrency_lock
-- Serialise one decision (a trigger's overlap, a task's or the global capacity) until COMMIT,
-- so two executors never both see the last free place. A try-lock: an executor that finds it
-- taken leaves that Run for now (never waits, so two acquisitions cannot deadlock).
SELECT pg_try_advisory_xact_lock(20812, hashtext(%(key)s)) AS locked;

-- name: notify_runs
-- Tell the workers that Runs were queued (a hint: they poll too).
SELECT pg_notify('qinglong_runs', '');

-- name: reconcile_pending
-- One autocommit read, no lock: could a reconciler cycle do anything now? pending: the same
-- conditions as lease_expired (without ignore_expiry) and retry_due, so "false" means both
-- would find nothing; flows_overdue: those of flow_runs_overdue. An idle replica sends this
-- instead of three transactions every cycle.
WITH observed AS MATERIALIZED (
    SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms
)
SELECT EXISTS (
           SELECT 1 FROM qinglong.run_attempts a
           JOIN qinglong.runs r ON r.id = a.run_id
           WHERE a.status IN ('claimed', 'starting', 'running')
             AND r.status IN ('dispatching', 'running')
             AND (a.status <> 'claimed' OR a.lease_token_digest IS NOT NULL)
             AND coalesce(a.lease_expires_at_ms, 0) + %(grace_ms)s
                 <= (SELECT now_ms FROM observed)
             AND (%(executor_type)s::varchar IS NULL
                  OR a.executor_type = %(executor_type)s::varchar))
       OR EXISTS (
           SELECT 1 FROM qinglong.runs r
           WHERE r.status = 'retry_wait' AND r.retry_at_ms <= (SELECT now_ms FROM observed))
       AS pending,
       EXISTS (
           SELECT 1 FROM qinglong.flow_runs f
           WHERE f.status = 'running' AND f.deadline_at_ms IS NOT NULL
             AND f.deadline_at_ms <= (SELECT now_ms FROM observed))
       AS flows_overdue;

-- name: lifecycle_steps_get
-- The lifecycle state of several Runs and Attempts (arrays of their ids), locked in Run id
-- order, each Run before its Attempt: the batched form of lifecycle_run_get and
-- lifecycle_attempt_get. (Arrays, not a JSON record set: the planner then reads both tables
-- by primary key instead of guessing a hundred rows and scanning.) The database's clock comes
-- with them, read as the rows are locked: a step only stamps times with it (the fence is the
-- generation and token, never a time), so a reading taken while waiting for a lock is as
-- good as one taken after. The trigger type says which Runs can be flow steps (the others'
-- endings need no look in flow_steps).
SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms,
       r.id AS run_id, r.status AS run_status, r.version, r.event_sequence, r.attempts_spent,
       (r.cancel_requested_at_ms IS NOT NULL) AS cancel_requested, r.cancel_reason,
       r.project_id, r.task_id, r.task_revision, r.trigger_type,
       a.id AS attempt_id, a.attempt, a.status AS attempt_status, a.executor_type, a.worker_id,
       a.lease_generation, a.lease_token_digest, a.lease_expires_at_ms, a.pid, a.executor_handle
FROM qinglong.runs r
JOIN qinglong.run_attempts a ON a.run_id = r.id
WHERE r.id = ANY(%(run_ids)s::varchar[]) AND a.id = ANY(%(attempt_ids)s::varchar[])
ORDER BY r.id
FOR UPDATE OF r, a;

-- name: lifecycle_apply
-- Apply planned steps in one statement: their Runs (a JSON array, one object per Run: the
-- new status, the event count and each column a step may set with its set_* flag; fields not
-- flagged are kept, and started_at_ms keeps the first attempt's start once set, so a retried
-- Run lasts from its first attempt's start to its last attempt's end; compare-and-set on each
-- version), their Attempts (likewise, compare-and-set on each status and lease generation)
-- and their events (as events_insert), so a step's events are appended by the
-- statement that moves its state. The counts come back: a Run or Attempt that moved under
-- our lock is noticed (and the transaction rolled back). The id arrays let the planner read
-- both tables by primary key (see lifecycle_steps_get).
WITH moved_runs AS (
    UPDATE qinglong.runs r
    SET status = c.status,
        version = r.version + 1,
        event_sequence = r.event_sequence + c.event_count,
        started_at_ms = CASE WHEN c.set_started_at_ms THEN coalesce(r.started_at_ms, c.started_at_ms)
                             ELSE r.started_at_ms END,
        finished_at_ms = CASE WHEN c.set_finished_at_ms THEN c.finished_at_ms ELSE r.finished_at_ms END,
        cancel_requested_at_ms = CASE WHEN c.set_cancel_requested_at_ms THEN c.cancel_requested_at_ms
                                      ELSE r.cancel_requested_at_ms END,
        cancel_reason = CASE WHEN c.set_cancel_reason THEN c.cancel_reason ELSE r.cancel_reason END,
        error_code = CASE WHEN c.set_error_code THEN c.error_code ELSE r.error_code END,
        error_summary = CASE WHEN c.set_error_summary THEN c.error_summary ELSE r.error_summary END,
        retry_at_ms = CASE WHEN c.set_retry_at_ms THEN c.retry_at_ms ELSE r.retry_at_ms END,
        attempts_spent = CASE WHEN c.set_attempts_spent THEN c.attempts_spent ELSE r.attempts_spent END,
        queued_at_ms = CASE WHEN c.set_queued_at_ms THEN c.queued_at_ms ELSE r.queued_at_ms END
    FROM jsonb_to_recordset(%(runs)s::jsonb) AS c(
        run_id varchar, expected_version integer, status varchar, event_count integer,
        set_started_at_ms boolean, started_at_ms bigint, set_finished_at_ms boolean,
        finished_at_ms bigint, set_cancel_requested_at_ms boolean, cancel_requested_at_ms bigint,
        set_cancel_reason boolean, cancel_reason varchar, set_error_code boolean, error_code varchar,
        set_error_summary boolean, error_summary varchar, set_retry_at_ms boolean, retry_at_ms bigint,
        set_attempts_spent boolean, attempts_spent integer, set_queued_at_ms boolean,
        queued_at_ms bigint)
    WHERE r.id = c.run_id AND r.version = c.expected_version
      AND r.id = ANY(%(run_ids)s::varchar[])  -- read by primary key (see lifecycle_steps_get)
    RETURNING r.id
),
moved_attempts AS (
    UPDATE qinglong.run_attempts a
    SET status = c.status,
        lease_generation = c.generation,
        worker_id = CASE WHEN c.set_worker_id THEN c.worker_id ELSE a.worker_id END,
        lease_token_digest = CASE WHEN c.set_lease_token_digest THEN c.lease_token_digest
                                  ELSE a.lease_token_digest END,
        lease_expires_at_ms = CASE WHEN c.set_lease_expires_at_ms THEN c.lease_expires_at_ms
                                   ELSE a.lease_expires_at_ms END,
        pid = CASE WHEN c.set_pid THEN c.pid ELSE a.pid END,
        executor_handle = CASE WHEN c.set_executor_handle THEN c.executor_handle
                               ELSE a.executor_handle END,
        log_path = CASE WHEN c.set_log_path THEN c.log_path ELSE a.log_path END,
        started_at_ms = CASE WHEN c.set_started_at_ms THEN c.started_at_ms ELSE a.started_at_ms END,
        finished_at_ms = CASE WHEN c.set_finished_at_ms THEN c.finished_at_ms ELSE a.finished_at_ms END,
        exit_code = CASE WHEN c.set_exit_code THEN c.exit_code ELSE a.exit_code END,
        error_code = CASE WHEN c.set_error_code THEN c.error_code ELSE a.error_code END,
        error_summary = CASE WHEN c.set_error_summary THEN c.error_summary ELSE a.error_summary END
    FROM jsonb_to_recordset(%(attempts)s::jsonb) AS c(
        run_id varchar, attempt_id varchar, expected_status varchar, expected_generation integer,
        status varchar, generation integer, set_worker_id boolean, worker_id varchar,
        set_lease_token_digest boolean, lease_token_digest char(64), set_lease_expires_at_ms boolean,
        lease_expires_at_ms bigint, set_pid boolean, pid integer, set_executor_handle boolean,
        executor_handle varchar, set_log_path boolean, log_path varchar, set_started_at_ms boolean,
        started_at_ms bigint, set_finished_at_ms boolean, finished_at_ms bigint,
        set_exit_code boolean, exit_code integer, set_error_code boolean, error_code varchar,
        set_error_summary boolean, error_summary varchar)
    WHERE a.id = c.attempt_id AND a.run_id = c.run_id AND a.status = c.expected_status
      AND a.lease_generation = c.expected_generation
      AND a.id = ANY(%(attempt_ids)s::varchar[])  -- read by primary key (see lifecycle_steps_get)
    RETURNING a.id
),
appended AS (
    INSERT INTO qinglong.run_events
        (id, run_id, sequence, type, dedupe_key, actor_type, actor_id, attempt_id, payload,
         created_at_ms)
    SELECT e.id, e.run_id, e.sequence, e.type, e.dedupe_key, e.actor_type, e.actor_id,
           e.attempt_id, e.payload, e.created_at_ms
    FROM jsonb_to_recordset(%(events)s::jsonb) AS e(
        id varchar, run_id varchar, sequence integer, type varchar, dedupe_key varchar,
        actor_type varchar, actor_id varchar, attempt_id varchar, payload jsonb,
        created_at_ms bigint)
    RETURNING 1
)
SELECT (SELECT count(*) FROM moved_runs) AS runs,
       (SELECT count(*) FROM moved_attempts) AS attempts,
       (SELECT count(*) FROM appended) AS events;

-- name: events_insert
-- Append the events of planned steps in one statement (a JSON array of the run_events
-- columns; each payload a JSON object in place, not text to parse again).
INSERT INTO qinglong.run_events
    (id, run_id, sequence, type, dedupe_key, actor_type, actor_id, attempt_id, payload,
     created_at_ms)
SELECT e.id, e.run_id, e.sequence, e.type, e.dedupe_key, e.actor_type, e.actor_id,
       e.attempt_id, e.payload, e.created_at_ms
FROM jsonb_to_recordset(%(events)s::jsonb) AS e(
    id varchar, run_id varchar, sequence integer, type varchar, dedupe_key varchar,
    actor_type varchar, actor_id varchar, attempt_id varchar, payload jsonb,
    created_at_ms bigint);
