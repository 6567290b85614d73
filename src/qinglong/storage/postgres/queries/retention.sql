-- Retention (docs/retention.md): claim records and the events of ended Runs older than the
-- horizon (database time minus the retention) are deleted in bounded batches, each statement
-- its own short READ COMMITTED transaction that first takes a transaction-level advisory
-- lock without waiting: while one replica deletes, the others' statements skip (they end
-- their pass), so replicas pruning at once never wait for, deadlock with or repeat each
-- other. Each statement's transaction first records its horizon in retention_marks, so
-- nothing is ever deleted past a mark `ql audit` cannot see. Needs the grants and indexes of
-- 0010_retention.

-- name: retention_gate
-- One pruning statement at a time across every replica (released at the transaction's end).
SELECT pg_try_advisory_xact_lock(7101, 1) AS held;

-- name: retention_allowed
-- Whether this role may delete what retention deletes and record its horizon (0010).
SELECT has_table_privilege('qinglong.trigger_schedule_claims', 'DELETE')
       AND has_table_privilege('qinglong.run_events', 'DELETE')
       AND has_table_privilege('qinglong.retention_marks', 'UPDATE') AS allowed;

-- name: retention_mark
-- The horizon of this statement (database time minus the retention), recorded first: the
-- mark only ever moves forward, and commits or rolls back with the delete that uses it.
WITH horizon AS (
    SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint
           - %(retention_ms)s AS at_ms
), marked AS (
    INSERT INTO qinglong.retention_marks AS m (subject, pruned_before_ms)
    SELECT %(subject)s, GREATEST(0, at_ms) FROM horizon
    ON CONFLICT (subject) DO UPDATE
    SET pruned_before_ms = GREATEST(m.pruned_before_ms, EXCLUDED.pruned_before_ms)
)
SELECT at_ms AS horizon_ms FROM horizon;

-- name: retention_prune_claims
-- A batch of claims acquired and expired before the horizon, oldest first, never the latest
-- claim of a schedule row (the fence a claim in flight or the next one compares with) and
-- never one of a trigger that still has an unfinished Run admitted before the horizon.
WITH horizon AS (
    SELECT %(horizon_ms)s::bigint AS at_ms
), held AS (
    SELECT DISTINCT r.project_id, r.trigger_id
    FROM qinglong.runs r, horizon h
    WHERE r.status IN ('created', 'queued', 'dispatching', 'running', 'waiting_approval',
                       'retry_wait', 'lost')
      AND r.trigger_id IS NOT NULL AND r.created_at_ms < h.at_ms
), doomed AS (
    SELECT c.project_id, c.trigger_id, c.claim_version
    FROM qinglong.trigger_schedule_claims c, horizon h
    WHERE c.acquired_at_ms < h.at_ms AND c.expires_at_ms < h.at_ms
      AND EXISTS (SELECT 1 FROM qinglong.trigger_schedules s
                  WHERE s.project_id = c.project_id AND s.trigger_id = c.trigger_id
                    AND s.claim_version > c.claim_version)
      AND NOT EXISTS (SELECT 1 FROM held
                      WHERE held.project_id = c.project_id AND held.trigger_id = c.trigger_id)
    ORDER BY c.acquired_at_ms
    LIMIT %(limit)s
)
DELETE FROM qinglong.trigger_schedule_claims c
USING doomed d
WHERE c.project_id = d.project_id AND c.trigger_id = d.trigger_id
  AND c.claim_version = d.claim_version;

-- name: retention_prune_events
-- The next slice of Runs that ended before the horizon, after the pass's cursor in (end
-- time, id) order, and every event of those that ended for good (a status no transition
-- leaves: an unfinished Run never loses an event). Returns what was deleted and where the
-- slice ended.
WITH horizon AS (
    SELECT %(horizon_ms)s::bigint AS at_ms
), slice AS (
    SELECT r.id, r.finished_at_ms, r.status
    FROM qinglong.runs r, horizon h
    WHERE r.finished_at_ms IS NOT NULL AND r.finished_at_ms < h.at_ms
      AND (r.finished_at_ms, r.id) > (%(after_ms)s::bigint, %(after_id)s::varchar)
    ORDER BY r.finished_at_ms, r.id
    LIMIT %(limit)s
), gone AS (
    DELETE FROM qinglong.run_events e USING slice s
    WHERE e.run_id = s.id AND s.status IN ('succeeded', 'failed', 'cancelled', 'timed_out')
    RETURNING 1
), last AS (
    SELECT finished_at_ms, id FROM slice ORDER BY finished_at_ms DESC, id DESC LIMIT 1
)
SELECT (SELECT count(*) FROM gone) AS deleted,
       (SELECT count(*) FROM slice) AS scanned,
       (SELECT finished_at_ms FROM last) AS last_ms,
       (SELECT id FROM last) AS last_id;

-- name: retention_sizes
-- How many rows the pruned tables hold (tests and the benchmark).
SELECT (SELECT count(*) FROM qinglong.trigger_schedule_claims) AS claims,
       (SELECT count(*) FROM qinglong.run_events) AS run_events;
