-- fragment: schedule_claimable
-- A row either branch of schedule_claim may take (after its own cursor condition): not held
-- by a live claim, not written after the statement's clock reading, not paused, its counters
-- not at their bounds, and its trigger eligible at the revision it is pinned to; in the
-- branches' common order.
      AND (s.claim_token IS NULL OR s.claim_expires_at_ms <= (SELECT now_ms FROM observed))
      AND s.updated_at_ms <= (SELECT now_ms FROM observed)
      AND (s.paused_from_ms IS NULL OR s.paused_until_ms <= (SELECT now_ms FROM observed))
      AND s.state_version < 2147483647 AND s.claim_version < 2147483647
      AND (SELECT true FROM qinglong.eligible_triggers e
           WHERE e.project_id = s.project_id AND e.trigger_id = s.trigger_id
             AND e.trigger_revision = s.trigger_revision)
    ORDER BY s.next_fire_at_ms NULLS FIRST, s.project_id, s.trigger_id

-- name: schedule_claim
-- Claim up to %(limit)s due rows in one auto-committed statement with one database-clock
-- reading: eligible rows only (due: the cursor has come, and with jitter its jittered instant
-- too), oldest cursor first, SKIP LOCKED, each with its own fence.
-- The plan must not depend on how many triggers there are (docs/design/admission-fast-path.md):
-- both branches walk trigger_schedules_due_idx in its own order with an index condition that
-- ends the scan at the first row not due (NULL cursors first, then cursors up to now; the
-- clock is an InitPlan parameter so the condition is an index bound, not a join filter),
-- and the definitions are looked up by primary key only for a row that is due and unclaimed
-- (a scalar sub-select, which the planner can neither pull up into a join nor hash).
-- One token for the rows of one claim statement: a row's claims are told apart by its
-- claim_version, which every claim raises, and the fence compares owner, token, version and
-- expiry together, so a claim on one row never fences a write of another. (A token per row
-- cost a read of /dev/urandom per row in the PostgreSQL builds without OpenSSL: 1.8 % of
-- the server's CPU in a burst.)
WITH observed AS MATERIALIZED (
    SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms,
           gen_random_uuid() AS token
),
uninitialised AS (SELECT * FROM (
    SELECT s.project_id, s.trigger_id
    FROM qinglong.trigger_schedules s
    WHERE s.next_fire_at_ms IS NULL
-- include: schedule_claimable
    LIMIT %(limit)s
    FOR UPDATE OF s SKIP LOCKED
) locked LIMIT 256),
-- (The outer LIMIT 256, MAX_BUDGET in domain/schedule.py, never cuts: the limit is at most
-- that. It tells the generic plan how few rows come, which keeps the estimated cost of the
-- statement low, and with it JIT compilation, which would cost more than the claim itself.)
due AS (SELECT * FROM (
    SELECT s.project_id, s.trigger_id
    FROM qinglong.trigger_schedules s
    WHERE s.next_fire_at_ms <= (SELECT now_ms FROM observed)
      AND (s.next_due_at_ms IS NULL OR s.next_due_at_ms <= (SELECT now_ms FROM observed))
-- include: schedule_claimable
    LIMIT greatest(0, %(limit)s - (SELECT count(*) FROM uninitialised))
    FOR UPDATE OF s SKIP LOCKED
) locked LIMIT 256),
candidates AS (
    SELECT project_id, trigger_id FROM uninitialised
    UNION ALL
    SELECT project_id, trigger_id FROM due
),
claimed AS (
    UPDATE qinglong.trigger_schedules s
    SET claim_owner = %(owner)s,
        claim_token = o.token,
        claim_version = s.claim_version + 1,
        claim_expires_at_ms = o.now_ms + %(lease_ms)s,
        state_version = s.state_version + 1,
        updated_at_ms = o.now_ms
    FROM candidates c, observed o
    WHERE s.project_id = c.project_id AND s.trigger_id = c.trigger_id
    RETURNING s.ctid AS row_ctid, s.*
),
logged AS (
    INSERT INTO qinglong.trigger_schedule_claims
        (project_id, trigger_id, trigger_revision, claim_version, claim_owner, claim_token,
         cursor_ms, acquired_at_ms, expires_at_ms)
    SELECT project_id, trigger_id, trigger_revision, claim_version, claim_owner, claim_token,
           next_fire_at_ms, updated_at_ms, claim_expires_at_ms
    FROM claimed
)
SELECT c.row_ctid::text AS row_locator,
       c.project_id, c.trigger_id, c.trigger_revision, c.next_fire_at_ms, c.state_version,
       c.claim_owner, c.claim_token::text AS claim_token, c.claim_version,
       c.updated_at_ms AS claim_acquired_at_ms, c.claim_expires_at_ms,
       c.paused_from_ms, c.paused_until_ms,
-- include: trigger_revision_columns
FROM claimed c
JOIN qinglong.trigger_revisions tr
  ON tr.project_id = c.project_id AND tr.trigger_id = c.trigger_id AND tr.revision = c.trigger_revision
ORDER BY c.next_fire_at_ms NULLS FIRST, c.project_id, c.trigger_id;

-- name: schedule_state_get
-- The durable state of one schedule row (for resolving an in-doubt commit).
SELECT trigger_revision, next_fire_at_ms, state_version, claim_token::text AS claim_token,
       claim_version
FROM qinglong.trigger_schedules
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s;

-- name: run_find_by_key
-- An admitted Run by its idempotency key, with the claim that admitted it (for resolving an
-- in-doubt commit: a Run admitted under another claim is not ours).
SELECT r.id, e.payload ->> 'claim_token' AS claim_token
FROM qinglong.runs r
LEFT JOIN qinglong.run_events e ON e.run_id = r.id AND e.sequence = 1
WHERE r.project_id = %(project_id)s AND r.idempotency_key = %(key)s;

-- name: schedule_next_due_in
-- Milliseconds from now (database clock) to the earliest future cursor, jittered instant or
-- end of a timed pause -- or, while a row is due and not paused, at most
-- %(due_recheck_ms)s: a row another replica holds is usually admitted at once and moved on
-- to an occurrence this read cannot see yet (or, if that replica dies, it is taken over when
-- the claim expires, which may come sooner), and a due row that looks unclaimed was most
-- likely locked by another replica's claim still in flight when this replica's own claim
-- skipped it. A due row that stays ineligible (its task disabled, its project archived) thus
-- costs a look a second, the cadence without wake-ups. A wake-up hint. A finished schedule's
-- cursor (%(done_cursor_ms)s, see domain/occurrences.py) is no due time. The due term walks
-- the due index over the due rows only (none when idle).
WITH observed AS MATERIALIZED (
    SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms
)
SELECT least((SELECT min(s.next_fire_at_ms) FROM qinglong.trigger_schedules s
               WHERE s.next_fire_at_ms > o.now_ms
                 AND s.next_fire_at_ms < %(done_cursor_ms)s::bigint),
             (SELECT min(s.next_due_at_ms) FROM qinglong.trigger_schedules s
               WHERE s.next_due_at_ms > o.now_ms),
             (SELECT min(s.paused_until_ms) FROM qinglong.trigger_schedules s
               WHERE s.paused_until_ms > o.now_ms),
             (SELECT min(CASE WHEN s.claim_expires_at_ms > o.now_ms
                              THEN least(s.claim_expires_at_ms, o.now_ms + %(due_recheck_ms)s)
                              ELSE o.now_ms + %(due_recheck_ms)s END)
               FROM qinglong.trigger_schedules s
               WHERE s.next_fire_at_ms <= o.now_ms
                 AND (s.next_due_at_ms IS NULL OR s.next_due_at_ms <= o.now_ms)
                 AND (s.paused_from_ms IS NULL OR s.paused_until_ms <= o.now_ms))
            ) - o.now_ms AS due_in_ms
FROM observed o;
