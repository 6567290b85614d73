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
-- The next slice of claims acquired before the horizon, after the pass's cursor in
-- (acquisition time, project, trigger, claim version) order, and every claim of the slice
-- that expired before the horizon and is not the latest claim of its schedule row (the fence
-- a claim in flight or the next one compares with). The latest claims stay behind the cursor;
-- the sweep wraps round, so one that a newer claim has since superseded goes on a later
-- sweep. Returns what was deleted and where the slice ended.
WITH slice AS (
    SELECT c.project_id, c.trigger_id, c.claim_version, c.acquired_at_ms, c.expires_at_ms
    FROM qinglong.trigger_schedule_claims c
    WHERE c.acquired_at_ms < %(horizon_ms)s AND c.acquired_at_ms >= %(after_ms)s
      AND (c.acquired_at_ms, c.project_id, c.trigger_id, c.claim_version)
          > (%(after_ms)s::bigint, %(after_project)s::varchar, %(after_trigger)s::varchar,
             %(after_version)s::integer)
    ORDER BY c.acquired_at_ms, c.project_id, c.trigger_id, c.claim_version
    LIMIT %(limit)s
), gone AS (
    DELETE FROM qinglong.trigger_schedule_claims c
    USING slice d
    WHERE c.project_id = d.project_id AND c.trigger_id = d.trigger_id
      AND c.claim_version = d.claim_version AND d.expires_at_ms < %(horizon_ms)s
      AND EXISTS (SELECT 1 FROM qinglong.trigger_schedules s
                  WHERE s.project_id = d.project_id AND s.trigger_id = d.trigger_id
                    AND s.claim_version > d.claim_version)
    RETURNING 1
), last AS (
    SELECT acquired_at_ms, project_id, trigger_id, claim_version FROM slice
    ORDER BY acquired_at_ms DESC, project_id DESC, trigger_id DESC, claim_version DESC LIMIT 1
)
SELECT (SELECT count(*) FROM gone) AS deleted,
       (SELECT count(*) FROM slice) AS scanned,
       (SELECT acquired_at_ms FROM last) AS last_ms,
       (SELECT project_id FROM last) AS last_project,
       (SELECT trigger_id FROM last) AS last_trigger,
       (SELECT claim_version FROM last) AS last_version;

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
