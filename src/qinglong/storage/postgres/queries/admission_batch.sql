-- The batched admission of claimed schedule rows (storage/admission/batch.py): one
-- SERIALIZABLE transaction re-reads the facts of every claimed row and writes every
-- admission of the batch with one set-based statement (storage/admission/writes.py). Every
-- row keeps its own fence.

-- name: schedule_facts_batch
-- The database clock, and for each claimed row (by its key and the trigger revision it was
-- claimed at) whether its trigger can still fire and the trigger revision to verify again.
-- The claim found the row eligible (qinglong.eligible_triggers); of what that view checks,
-- only the heads and the project can have changed since, so only they are read again here:
-- the trigger's head still at the claimed revision, its task's head still at the task
-- revision that revision pins, and the project active. The rest is immutable (no role may
-- update or delete a revision: postgres/roles.py) and verified by the committer
-- (batch.py: the trigger revision read here against its digest and the claimed one,
-- including its enabled flag and spec; the task revision's digest and enabled flag once,
-- pinned.py). The task revision and its remote_worker execution revision come only for the
-- rows flagged in %(unverified)s. The schedule rows themselves are not read here: the write
-- statement finds each by its physical address under its full fence, so a row changed since
-- its claim is simply not written. (Reading 64 schedule rows first would take predicate
-- locks on whole heap pages, and concurrent batches of two replicas would then fail
-- serialization against each other; an UPDATE releases its own tuple lock.)
WITH observed AS MATERIALIZED (
    SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms
)
SELECT w.ord, o.now_ms, w.project_id, w.trigger_id,
       coalesce(h.current_revision = w.trigger_revision
                AND th.current_revision = w.task_revision
                AND p.status = 'active', false) AS eligible,
-- include: revision_facts_columns
-- include: trigger_revision_columns
FROM unnest(%(project_ids)s::text[], %(trigger_ids)s::text[], %(trigger_revisions)s::integer[],
            %(task_ids)s::text[], %(task_revisions)s::integer[], %(unverified)s::boolean[])
     WITH ORDINALITY AS w(project_id, trigger_id, trigger_revision, task_id, task_revision,
                          unverified, ord)
CROSS JOIN observed o
LEFT JOIN qinglong.triggers h
  ON h.project_id = w.project_id AND h.trigger_id = w.trigger_id
LEFT JOIN qinglong.task_definitions th
  ON th.project_id = w.project_id AND th.task_id = w.task_id
LEFT JOIN qinglong.projects p ON p.id = w.project_id
LEFT JOIN qinglong.trigger_revisions tr
  ON tr.project_id = w.project_id AND tr.trigger_id = w.trigger_id
 AND tr.revision = w.trigger_revision
LEFT JOIN qinglong.task_definition_revisions kr
  ON w.unverified AND kr.project_id = w.project_id AND kr.task_id = w.task_id
 AND kr.revision = w.task_revision
LEFT JOIN qinglong.task_execution_revisions x
  ON x.project_id = kr.project_id AND x.task_id = kr.task_id
 AND x.source_revision = kr.revision AND x.executor_type = 'remote_worker'
ORDER BY w.ord;

-- name: schedule_admit_batch
-- Every write of a batch in one statement: advance each cursor and clear its claim under
-- its full fence (the rows advanced come back), and insert the misfire records, Runs,
-- Attempts and events of exactly the rows that advanced. The row counts are returned so the
-- caller can check that each admission wrote its whole shape. The rows are found by their
-- physical addresses only (a TID scan): the key and the expiry are compared as expressions
-- and the token without implying it is not null, so that no index of trigger_schedules can
-- serve the update (reading its pages makes concurrent admissions falsely conflict). The
-- token the caller sends is never null, so the comparison is the fence's equality. Each
-- schedule row arrives as one JSON array: its move's columns, then the lists of the rows it
-- writes if it advances (each may be empty), each row an array of its columns in the order
-- named here (writes.py: MOVE_COLUMNS, NESTED, RUN_COLUMNS, ...;
-- tests/contract/test_query_names.py compares them). So every other row rides along with
-- its move: no join finds them again.
WITH moves AS (
    SELECT *
    FROM (
        SELECT o->>0 AS row_locator, o->>1 AS project_id, o->>2 AS trigger_id,
            (o->>3)::integer AS trigger_revision, (o->>4)::integer AS state_version,
            (o->>5)::bigint AS cursor_ms, o->>6 AS claim_owner, (o->>7)::uuid AS claim_token,
            (o->>8)::integer AS claim_version, (o->>9)::bigint AS claim_expires_at_ms,
            (o->>10)::bigint AS next_fire_at_ms, (o->>11)::bigint AS next_due_at_ms,
            (o->>12)::bigint AS scheduled_for_ms, o->13 AS misfires, o->14 AS runs,
            o->15 AS attempts, o->16 AS events
        FROM jsonb_array_elements(%(moves)s::jsonb) AS j(o)
    ) AS m
),
advanced AS (
    UPDATE qinglong.trigger_schedules s
    SET next_fire_at_ms = m.next_fire_at_ms,
        next_due_at_ms = m.next_due_at_ms,
        last_scheduled_at_ms = coalesce(m.scheduled_for_ms, s.last_scheduled_at_ms),
        state_version = s.state_version + 1,
        claim_owner = NULL, claim_token = NULL, claim_expires_at_ms = NULL,
        updated_at_ms = %(now_ms)s
    FROM moves m
    WHERE s.ctid = ANY(%(row_locators)s::tid[])
      AND s.ctid = m.row_locator::tid
      AND s.project_id || chr(31) || s.trigger_id = m.project_id || chr(31) || m.trigger_id
      AND s.trigger_revision = m.trigger_revision AND s.state_version = m.state_version
      AND s.next_fire_at_ms IS NOT DISTINCT FROM m.cursor_ms
      AND s.claim_owner = m.claim_owner AND s.claim_token IS NOT DISTINCT FROM m.claim_token
      AND s.claim_version = m.claim_version AND s.claim_expires_at_ms + 0 = m.claim_expires_at_ms
      AND m.claim_expires_at_ms > %(now_ms)s
    RETURNING s.project_id, s.trigger_id, m.misfires, m.runs, m.attempts, m.events
),
new_runs AS (
    INSERT INTO qinglong.runs
        (id, project_id, task_id, task_revision, task_name, task_snapshot_ref, trigger_id,
         trigger_revision, trigger_type, execution_origin, execution_owner, triggered_by,
         scheduled_for_ms, status, version, event_sequence, priority, idempotency_key,
         created_at_ms, queued_at_ms, overlap_policy, overlap_key, overlap_queue_limit, requires,
         parameters)
    SELECT o->>0 AS id, o->>1 AS project_id, o->>2 AS task_id, o->>3 AS task_revision,
        o->>4 AS task_name, o->>5 AS task_snapshot_ref, o->>6 AS trigger_id,
        (o->>7)::integer AS trigger_revision, o->>8 AS trigger_type,
        o->>9 AS execution_origin, o->>10 AS execution_owner, o->>11 AS triggered_by,
        (o->>12)::bigint AS scheduled_for_ms, o->>13 AS status,
        (o->>14)::integer AS version, (o->>15)::integer AS event_sequence,
        (o->>16)::integer AS priority, o->>17 AS idempotency_key,
        (o->>18)::bigint AS created_at_ms, (o->>19)::bigint AS queued_at_ms,
        o->>20 AS overlap_policy, o->>21 AS overlap_key,
        (o->>22)::integer AS overlap_queue_limit, (o->>23)::jsonb AS requires,
        (o->>24)::jsonb AS parameters
    FROM advanced a, jsonb_array_elements(a.runs) AS j(o)
    RETURNING 1
),
new_attempts AS (
    INSERT INTO qinglong.run_attempts
        (id, run_id, attempt, status, executor_type, callback_sequence, created_at_ms)
    SELECT o->>0 AS id, o->>1 AS run_id, (o->>2)::integer AS attempt, o->>3 AS status,
        o->>4 AS executor_type, (o->>5)::integer AS callback_sequence,
        (o->>6)::bigint AS created_at_ms
    FROM advanced a, jsonb_array_elements(a.attempts) AS j(o)
    RETURNING 1
),
new_events AS (
    INSERT INTO qinglong.run_events
        (id, run_id, sequence, type, dedupe_key, actor_type, actor_id, attempt_id, payload,
         created_at_ms)
    SELECT o->>0 AS id, o->>1 AS run_id, (o->>2)::integer AS sequence, o->>3 AS type,
        o->>4 AS dedupe_key, o->>5 AS actor_type, o->>6 AS actor_id, o->>7 AS attempt_id,
        o->8 AS payload, (o->>9)::bigint AS created_at_ms
    FROM advanced a, jsonb_array_elements(a.events) AS j(o)
    RETURNING 1
),
new_misfires AS (
    INSERT INTO qinglong.trigger_schedule_misfires
        (project_id, trigger_id, trigger_revision, due_at_ms, skipped_through_ms,
         next_fire_at_ms, policy, run_id, claim_version, decided_at_ms)
    SELECT o->>0 AS project_id, o->>1 AS trigger_id, (o->>2)::integer AS trigger_revision,
        (o->>3)::bigint AS due_at_ms, (o->>4)::bigint AS skipped_through_ms,
        (o->>5)::bigint AS next_fire_at_ms, o->>6 AS policy, o->>7 AS run_id,
        (o->>8)::integer AS claim_version, (o->>9)::bigint AS decided_at_ms
    FROM advanced a, jsonb_array_elements(a.misfires) AS j(o)
    RETURNING 1
)
SELECT a.project_id, a.trigger_id,
       (SELECT count(*) FROM new_runs) AS runs,
       (SELECT count(*) FROM new_attempts) AS attempts,
       (SELECT count(*) FROM new_events) AS events,
       (SELECT count(*) FROM new_misfires) AS misfires
FROM advanced a;
