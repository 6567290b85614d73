-- name: schedule_claim
-- Claim up to :limit due or uninitialised rows whose trigger can fire, oldest cursor first
-- (due: the cursor has come, and with jitter its jittered instant too), at one reading of the
-- node clock (:now_ms). One process serves the file, so a claim writes nothing: its fence is
-- the row's state version, which the commit compares (schedule_advance_fenced), and a token
-- drawn for it (a random UUID, as PostgreSQL's claim draws: run.created records it; the
-- sub-select names the row, so SQLite draws one per row, not one per statement); the
-- lease it states bounds how long the decision may wait for its commit.
SELECT NULL AS row_locator, s.project_id, s.trigger_id, s.trigger_revision,
       s.next_fire_at_ms, s.state_version, s.paused_from_ms, s.paused_until_ms,
       :owner AS claim_owner,
       (SELECT lower(substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-4' || substr(h, 14, 3)
                     || '-' || substr('89ab', 1 + abs(random()) % 4, 1) || substr(h, 18, 3)
                     || '-' || substr(h, 21, 12))
        FROM (SELECT hex(randomblob(16)) AS h WHERE s.trigger_id IS NOT NULL)) AS claim_token,
       s.state_version AS claim_version, :now_ms AS claim_acquired_at_ms,
       :now_ms + :lease_ms AS claim_expires_at_ms,
-- include: trigger_revision_columns
FROM trigger_schedules s
JOIN eligible_triggers e
  ON e.project_id = s.project_id AND e.trigger_id = s.trigger_id
 AND e.trigger_revision = s.trigger_revision
JOIN trigger_revisions tr
  ON tr.project_id = s.project_id AND tr.trigger_id = s.trigger_id
 AND tr.revision = s.trigger_revision
WHERE (s.next_fire_at_ms IS NULL OR s.next_fire_at_ms <= :now_ms)
  AND (s.next_due_at_ms IS NULL OR s.next_due_at_ms <= :now_ms)
  AND (s.paused_from_ms IS NULL OR s.paused_until_ms <= :now_ms)
ORDER BY s.next_fire_at_ms, s.project_id, s.trigger_id
LIMIT :limit;

-- name: schedule_advance_fenced
-- Advance the cursor under the claim's fence: the row's revision, state version (the claim
-- version here) and cursor are still the claimed ones, and the claim has not expired.
UPDATE trigger_schedules
SET next_fire_at_ms = :next_fire_at_ms,
    next_due_at_ms = :next_due_at_ms,
    last_scheduled_at_ms = coalesce(:scheduled_for_ms, last_scheduled_at_ms),
    state_version = state_version + 1,
    updated_at_ms = max(updated_at_ms, :now_ms)
WHERE project_id = :project_id AND trigger_id = :trigger_id
  AND trigger_revision = :trigger_revision AND state_version = :state_version
  AND state_version = :claim_version
  AND next_fire_at_ms IS :cursor_ms
  AND :claim_expires_at_ms > :now_ms;

-- name: schedule_next_due_in
-- Milliseconds from now (:now_ms) to the earliest future cursor, jittered instant or end of a
-- timed pause (a wake-up hint for the cadence); a finished schedule's cursor
-- (:done_cursor_ms, see domain/occurrences.py) is no due time. One process serves the file,
-- so no row is held by anyone else: :due_recheck_ms is not needed here.
SELECT min(at_ms) - :now_ms AS due_in_ms FROM (
    SELECT min(next_fire_at_ms) AS at_ms FROM trigger_schedules
    WHERE next_fire_at_ms > :now_ms AND next_fire_at_ms < :done_cursor_ms
    UNION ALL
    SELECT min(next_due_at_ms) FROM trigger_schedules WHERE next_due_at_ms > :now_ms
    UNION ALL
    SELECT min(paused_until_ms) FROM trigger_schedules WHERE paused_until_ms > :now_ms
);

-- name: schedule_misfire_insert
-- Record the stretch of occurrences a misfire decision dropped (or a pause held back).
INSERT INTO trigger_schedule_misfires
    (project_id, trigger_id, trigger_revision, due_at_ms, skipped_through_ms, next_fire_at_ms,
     policy, run_id, decided_at_ms)
VALUES
    (:project_id, :trigger_id, :trigger_revision, :due_at_ms, :skipped_through_ms,
     :next_fire_at_ms, :policy, :run_id, :decided_at_ms);

-- name: schedule_facts_batch
-- The clock, and for each claimed row (by its key and the trigger revision it was claimed
-- at; the arrays come as JSON text, in the same order) whether its trigger can still fire
-- and the trigger revision to verify again. The task revision and its local_process
-- execution revision come only for the rows flagged in :unverified: revisions are never
-- changed once written, and the committer keeps those it verified (admission/pinned.py).
-- (Eligibility is asked per row, by key: joined, SQLite materialised the whole view for
-- every batch, a read of every trigger for each batch of decisions.) Each array but the
-- first is materialised once, so SQLite joins it by an automatic index on its keys: joined
-- to json_each directly, it scanned (and parsed) the whole array again for every row, which
-- took 12 ms for a batch of 256 with three arrays and 30 ms with six (1.9 ms so).
WITH t AS MATERIALIZED (SELECT key, value FROM json_each(:trigger_ids)),
r AS MATERIALIZED (SELECT key, value FROM json_each(:trigger_revisions)),
k AS MATERIALIZED (SELECT key, value FROM json_each(:task_ids)),
v AS MATERIALIZED (SELECT key, value FROM json_each(:task_revisions)),
u AS MATERIALIZED (SELECT key, value FROM json_each(:unverified)),
w AS (
    SELECT p.key AS ord, p.value AS project_id, t.value AS trigger_id,
           r.value AS trigger_revision, k.value AS task_id, v.value AS task_revision,
           u.value AS unverified
    FROM json_each(:project_ids) p
    JOIN t ON t.key = p.key
    JOIN r ON r.key = p.key
    JOIN k ON k.key = p.key
    JOIN v ON v.key = p.key
    JOIN u ON u.key = p.key
)
SELECT w.ord, :now_ms AS now_ms, w.project_id, w.trigger_id,
       EXISTS (SELECT 1 FROM eligible_triggers el
               WHERE el.project_id = w.project_id AND el.trigger_id = w.trigger_id
                 AND el.trigger_revision = w.trigger_revision) AS eligible,
-- include: revision_facts_columns
-- include: trigger_revision_columns
FROM w
LEFT JOIN trigger_revisions tr
  ON tr.project_id = w.project_id AND tr.trigger_id = w.trigger_id
 AND tr.revision = w.trigger_revision
LEFT JOIN task_definition_revisions kr
  ON w.unverified AND kr.project_id = w.project_id AND kr.task_id = w.task_id
 AND kr.revision = w.task_revision
LEFT JOIN task_execution_revisions x
  ON x.project_id = kr.project_id AND x.task_id = kr.task_id
 AND x.source_revision = kr.revision AND x.executor_type = 'local_process'
ORDER BY w.ord;

-- name: schedule_state_get
-- The durable state of one schedule row (for resolving an in-doubt commit).
SELECT trigger_revision, next_fire_at_ms, state_version, NULL AS claim_token,
       state_version AS claim_version
FROM trigger_schedules
WHERE project_id = :project_id AND trigger_id = :trigger_id;

-- name: run_find_by_key
-- An admitted Run by its idempotency key, with the claim that admitted it.
SELECT r.id, json_extract(e.payload, '$.claim_token') AS claim_token
FROM runs r
LEFT JOIN run_events e ON e.run_id = r.id AND e.sequence = 1
WHERE r.project_id = :project_id AND r.idempotency_key = :key;
