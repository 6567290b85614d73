-- name: audit_trigger_revisions
-- Every trigger revision with its cron spec (the audit's schedule history).
SELECT project_id, trigger_id, revision, task_id, task_revision, enabled, created_at_ms,
       spec_json -> 'config' ->> 'expression' AS expression,
       spec_json -> 'config' ->> 'timezone' AS timezone,
       spec_json -> 'config' ->> 'misfirePolicy' AS misfire_policy,
       spec_json -> 'config' AS config
FROM qinglong.trigger_revisions ORDER BY project_id, trigger_id, revision;

-- name: audit_task_revisions
-- Every task revision (a new one makes triggers pinned to the old one stale).
SELECT project_id, task_id, revision, enabled, created_at_ms
FROM qinglong.task_definition_revisions ORDER BY project_id, task_id, revision;

-- name: audit_project_archivals
-- When projects were archived and restored (nothing fires meanwhile).
SELECT project_id, archived_at_ms, restored_at_ms FROM qinglong.project_archivals;

-- name: audit_instances
-- The heartbeats of the processes that served the database (where the scheduler last ran).
SELECT instance_id, role, seen_at_ms, stopped_at_ms FROM qinglong.instances;

-- name: audit_runs
-- The Runs standing for occurrences in the window (scheduled and backfilled; manual Runs
-- stand for none) with their shape and the claim that admitted them (none: backfilled);
-- events: all of them (none left means retention pruned them, if the Run ended before the
-- evidence horizon: docs/retention.md).
SELECT r.id, r.project_id, r.trigger_id, r.trigger_revision, r.scheduled_for_ms, r.created_at_ms,
       r.trigger_type, r.status, r.finished_at_ms,
       (SELECT count(*) FROM qinglong.run_events e WHERE e.run_id = r.id) AS events,
       (SELECT count(*) FROM qinglong.run_attempts a WHERE a.run_id = r.id AND a.attempt = 1)
         AS attempts,
       (SELECT count(*) FROM qinglong.run_events e WHERE e.run_id = r.id
         AND ((e.sequence = 1 AND e.type = 'run.created')
              OR (e.sequence = 2 AND e.type = 'run.queued'))) AS admission_events,
       (SELECT (e.payload ->> 'claim_version')::integer FROM qinglong.run_events e
         WHERE e.run_id = r.id AND e.sequence = 1) AS claim_version,
       (SELECT e.payload ->> 'claim_token' FROM qinglong.run_events e
         WHERE e.run_id = r.id AND e.sequence = 1) AS claim_token
FROM qinglong.runs r
WHERE r.trigger_type IN ('cron', 'backfill')
  AND r.scheduled_for_ms BETWEEN %(from_ms)s AND %(to_ms)s
UNION ALL
-- and the flow runs that occurrences of flow triggers started, with the claim they name;
-- attempts: their step rows (a flow run is written with one per node)
SELECT f.id, f.project_id, f.trigger_id, f.trigger_revision, f.scheduled_for_ms,
       f.created_at_ms, 'flow_start', f.status, f.finished_at_ms, NULL,
       (SELECT count(*) FROM qinglong.flow_steps s WHERE s.flow_run_id = f.id), 0,
       f.claim_version, f.claim_token
FROM qinglong.flow_runs f
WHERE f.trigger_id IS NOT NULL AND f.scheduled_for_ms BETWEEN %(from_ms)s AND %(to_ms)s;

-- name: audit_claims
-- Claims granted around the window (the evidence for fences and cursor history).
SELECT project_id, trigger_id, trigger_revision, claim_version, claim_owner,
       claim_token::text AS claim_token, cursor_ms, acquired_at_ms, expires_at_ms
FROM qinglong.trigger_schedule_claims
WHERE acquired_at_ms BETWEEN %(from_ms)s AND %(to_ms)s;

-- name: audit_misfires
-- Misfire decisions around the window.
SELECT project_id, trigger_id, trigger_revision, due_at_ms, skipped_through_ms, next_fire_at_ms,
       policy, run_id, decided_at_ms
FROM qinglong.trigger_schedule_misfires
WHERE decided_at_ms BETWEEN %(from_ms)s AND %(to_ms)s;

-- name: audit_schedules
-- Current schedule rows.
SELECT project_id, trigger_id, trigger_revision, next_fire_at_ms, last_scheduled_at_ms,
       claim_version
FROM qinglong.trigger_schedules;

-- name: audit_run_execution
-- How each Run in the window was executed: its state, how many terminal events it has, its
-- Attempts (count, highest number, how many still active, and when the newest lease ends),
-- and when a retry is due.
SELECT r.id, r.status, r.scheduled_for_ms, r.retry_at_ms, r.attempts_spent, r.finished_at_ms,
       (SELECT count(*) FROM qinglong.run_events e WHERE e.run_id = r.id) AS events,
       (SELECT count(*) FROM qinglong.run_events e WHERE e.run_id = r.id
         AND e.type IN ('run.succeeded', 'run.failed', 'run.cancelled', 'run.timed_out',
                        'run.lost')) AS terminal_events,
       (SELECT count(*) FROM qinglong.run_attempts a WHERE a.run_id = r.id) AS attempts,
       (SELECT max(a.attempt) FROM qinglong.run_attempts a WHERE a.run_id = r.id) AS last_attempt,
       (SELECT count(*) FROM qinglong.run_attempts a WHERE a.run_id = r.id
         AND a.status IN ('claimed', 'starting', 'running')) AS active_attempts,
       (SELECT max(a.lease_expires_at_ms) FROM qinglong.run_attempts a WHERE a.run_id = r.id
         AND a.status IN ('claimed', 'starting', 'running')) AS lease_expires_at_ms
FROM qinglong.runs r
WHERE r.scheduled_for_ms BETWEEN %(from_ms)s AND %(to_ms)s;

-- name: audit_attempt_spans
-- When each started Attempt of a Run with more than one ran, as the database recorded it.
SELECT a.run_id, a.id, a.attempt, a.status, a.started_at_ms, a.finished_at_ms
FROM qinglong.run_attempts a
WHERE a.started_at_ms IS NOT NULL
  AND a.run_id IN (SELECT r.id FROM qinglong.runs r
                   WHERE r.scheduled_for_ms BETWEEN %(from_ms)s AND %(to_ms)s)
  AND EXISTS (SELECT 1 FROM qinglong.run_attempts b WHERE b.run_id = a.run_id AND b.id <> a.id)
ORDER BY a.run_id, a.attempt;

-- name: audit_trigger_pauses
-- Every pause of a trigger and when it ended (resumed by hand, or its until reached).
SELECT project_id, trigger_id, paused_at_ms,
       CASE WHEN resumed_at_ms IS NOT NULL AND (until_ms IS NULL OR resumed_at_ms < until_ms)
            THEN resumed_at_ms ELSE until_ms END AS ended_at_ms
FROM qinglong.trigger_pauses;

-- name: audit_retention_marks
-- How far retention pruned each table (docs/retention.md): evidence before a mark may be
-- gone; after it, missing evidence is a violation. No row: nothing was pruned.
SELECT subject, pruned_before_ms FROM qinglong.retention_marks;

-- name: audit_flow_runs
-- The flow runs started in the window (the flow audit, audit/flows.py).
SELECT id, project_id, flow_id, flow_revision, status, ended_reason, created_at_ms,
       finished_at_ms
FROM qinglong.flow_runs
WHERE created_at_ms BETWEEN %(from_ms)s AND %(to_ms)s
  AND (%(project_id)s::text IS NULL OR project_id = %(project_id)s)
ORDER BY created_at_ms, id;

-- name: audit_flow_steps
-- The steps of those flow runs, each with its Run's status.
SELECT s.flow_run_id, s.node_id, s.status, s.run_id, s.error_summary, r.status AS run_status
FROM qinglong.flow_steps s
JOIN qinglong.flow_runs f ON f.id = s.flow_run_id
LEFT JOIN qinglong.runs r ON r.id = s.run_id
WHERE f.created_at_ms BETWEEN %(from_ms)s AND %(to_ms)s
  AND (%(project_id)s::text IS NULL OR f.project_id = %(project_id)s);

-- name: audit_flow_step_runs
-- Every Run released as a step of those flow runs, by its key.
SELECT r.id, r.idempotency_key
FROM qinglong.runs r
JOIN qinglong.flow_runs f ON f.id = r.triggered_by
WHERE r.trigger_type = 'flow' AND f.created_at_ms BETWEEN %(from_ms)s AND %(to_ms)s
  AND (%(project_id)s::text IS NULL OR f.project_id = %(project_id)s);
