-- The batched admission of claimed schedule rows (storage/admission/batch.py): one
-- SERIALIZABLE transaction re-reads the facts of every claimed row and writes every
-- admission of the batch with one set-based statement (storage/admission/writes.py). Every
-- row keeps its own fence.

-- name: schedule_facts_batch
-- The database clock, and for each claimed row (by its key and the trigger revision it was
-- claimed at) whether its trigger can still fire (its head at that revision, enabled, its
-- task at the pinned revision and enabled, its project active) and the trigger revision to
-- verify again. The task revision and its remote_worker execution revision come only for
-- the rows flagged in %(unverified)s: revisions are immutable (no role may update or delete
-- one: postgres/roles.py), and the committer keeps those it verified (admission/pinned.py).
-- The schedule rows themselves are not read here: the write statement finds each by its
-- physical address under its full fence, so a row changed since its claim is simply not
-- written. (Reading 64 schedule rows first would take predicate locks on whole heap pages,
-- and concurrent batches of two replicas would then fail serialization against each other;
-- an UPDATE releases its own tuple lock.)
WITH observed AS MATERIALIZED (
    SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms
)
SELECT w.ord, o.now_ms, w.project_id, w.trigger_id,
       el.trigger_id IS NOT NULL AS eligible,
-- include: revision_facts_columns
-- include: trigger_revision_columns
FROM unnest(%(project_ids)s::text[], %(trigger_ids)s::text[], %(trigger_revisions)s::integer[],
            %(task_ids)s::text[], %(task_revisions)s::integer[], %(unverified)s::boolean[])
     WITH ORDINALITY AS w(project_id, trigger_id, trigger_revision, task_id, task_revision,
                          unverified, ord)
CROSS JOIN observed o
LEFT JOIN qinglong.eligible_triggers el
  ON el.project_id = w.project_id AND el.trigger_id = w.trigger_id
 AND el.trigger_revision = w.trigger_revision
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
-- its full fence (the rows advanced come back), and insert the Runs, Attempts, events and
-- misfire records of exactly the rows that advanced. The row counts are returned so the
-- caller can check that each admission wrote its whole shape. The rows are found by their
-- physical addresses only (a TID scan): the key and the expiry are compared as expressions
-- and the token without implying it is not null, so that no index of trigger_schedules can
-- serve the update (reading its pages makes concurrent admissions falsely conflict). The
-- token the caller sends is never null, so the comparison is the fence's equality. Each
-- row arrives as a JSON array of its columns in the order named here (writes.py: MOVE_COLUMNS,
-- RUN_COLUMNS, ...; tests/contract/test_query_names.py compares them).
WITH moves AS (
    SELECT *
    FROM (
        SELECT o->>0 AS row_locator, o->>1 AS project_id, o->>2 AS trigger_id,
            (o->>3)::integer AS trigger_revision, (o->>4)::integer AS state_version,
            (o->>5)::bigint AS cursor_ms, o->>6 AS claim_owner, (o->>7)::uuid AS claim_token,
            (o->>8)::integer AS claim_version, (o->>9)::bigint AS claim_expires_at_ms,
            (o->>10)::bigint AS next_fire_at_ms, (o->>11)::bigint AS next_due_at_ms,
            (o->>12)::bigint AS scheduled_for_ms
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
    RETURNING s.project_id, s.trigger_id
),
new_runs AS (
    INSERT INTO qinglong.runs
        (id, project_id, task_id, task_revision, task_name, task_snapshot_ref, trigger_id,
         trigger_revision, trigger_type, execution_origin, execution_owner, triggered_by,
         scheduled_for_ms, status, version, event_sequence, priority, idempotency_key,
         created_at_ms, queued_at_ms, overlap_policy, overlap_key, overlap_queue_limit, requires,
         parameters)
    SELECT r.id, r.project_id, r.task_id, r.task_revision, r.task_name, r.task_snapshot_ref,
           r.trigger_id, r.trigger_revision, r.trigger_type, r.execution_origin,
           r.execution_owner, r.triggered_by, r.scheduled_for_ms, r.status, r.version,
           r.event_sequence, r.priority, r.idempotency_key, r.created_at_ms, r.queued_at_ms,
           r.overlap_policy, r.overlap_key, r.overlap_queue_limit, r.requires, r.parameters
    FROM (
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
        FROM jsonb_array_elements(%(runs)s::jsonb) AS j(o)
    ) AS r
    JOIN advanced a ON a.project_id = r.project_id AND a.trigger_id = r.trigger_id
    RETURNING 1
),
new_attempts AS (
    INSERT INTO qinglong.run_attempts
        (id, run_id, attempt, status, executor_type, callback_sequence, created_at_ms)
    SELECT x.id, x.run_id, x.attempt, x.status, x.executor_type, x.callback_sequence,
           x.created_at_ms
    FROM (
        SELECT o->>0 AS project_id, o->>1 AS trigger_id, o->>2 AS id, o->>3 AS run_id,
            (o->>4)::integer AS attempt, o->>5 AS status, o->>6 AS executor_type,
            (o->>7)::integer AS callback_sequence, (o->>8)::bigint AS created_at_ms
        FROM jsonb_array_elements(%(attempts)s::jsonb) AS j(o)
    ) AS x
    JOIN advanced a ON a.project_id = x.project_id AND a.trigger_id = x.trigger_id
    RETURNING 1
),
new_events AS (
    INSERT INTO qinglong.run_events
        (id, run_id, sequence, type, dedupe_key, actor_type, actor_id, attempt_id, payload,
         created_at_ms)
    SELECT v.id, v.run_id, v.sequence, v.type, v.dedupe_key, v.actor_type, v.actor_id,
           v.attempt_id, v.payload, v.created_at_ms
    FROM (
        SELECT o->>0 AS project_id, o->>1 AS trigger_id, o->>2 AS id, o->>3 AS run_id,
            (o->>4)::integer AS sequence, o->>5 AS type, o->>6 AS dedupe_key,
            o->>7 AS actor_type, o->>8 AS actor_id, o->>9 AS attempt_id, o->10 AS payload,
            (o->>11)::bigint AS created_at_ms
        FROM jsonb_array_elements(%(events)s::jsonb) AS j(o)
    ) AS v
    JOIN advanced a ON a.project_id = v.project_id AND a.trigger_id = v.trigger_id
    RETURNING 1
),
new_misfires AS (
    INSERT INTO qinglong.trigger_schedule_misfires
        (project_id, trigger_id, trigger_revision, due_at_ms, skipped_through_ms,
         next_fire_at_ms, policy, run_id, claim_version, decided_at_ms)
    SELECT f.project_id, f.trigger_id, f.trigger_revision, f.due_at_ms, f.skipped_through_ms,
           f.next_fire_at_ms, f.policy, f.run_id, f.claim_version, f.decided_at_ms
    FROM (
        SELECT o->>0 AS project_id, o->>1 AS trigger_id, (o->>2)::integer AS trigger_revision,
            (o->>3)::bigint AS due_at_ms, (o->>4)::bigint AS skipped_through_ms,
            (o->>5)::bigint AS next_fire_at_ms, o->>6 AS policy, o->>7 AS run_id,
            (o->>8)::integer AS claim_version, (o->>9)::bigint AS decided_at_ms
        FROM jsonb_array_elements(%(misfires)s::jsonb) AS j(o)
    ) AS f
    JOIN advanced a ON a.project_id = f.project_id AND a.trigger_id = f.trigger_id
    RETURNING 1
)
SELECT a.project_id, a.trigger_id,
       (SELECT count(*) FROM new_runs) AS runs,
       (SELECT count(*) FROM new_attempts) AS attempts,
       (SELECT count(*) FROM new_events) AS events,
       (SELECT count(*) FROM new_misfires) AS misfires
FROM advanced a;
