-- Flows (docs/controls/flows.md): publishing (as ql_admin or ql_web), starting and
-- cancelling flow runs (ql_runtime, ql_web) and releasing their steps in the transaction
-- that ends a node's Run (whoever ends it, ql_worker included). The flow run's row is the
-- mutex of its progress: every statement that moves its steps locks it first
-- (flow_run_lock), after the Runs it ends, so two Runs of one fan-in ending at once are
-- recorded one after the other and the second sees the first.

-- fragment: flow_revision_columns
-- A flow revision's columns (of r), as storage/flow_records.py reads them.
       r.project_id, r.flow_id, r.revision, r.name, r.spec_json::text AS spec_json,
       r.pins_json::text AS pins_json, r.content_digest, r.created_at_ms

-- fragment: flow_run_columns
-- A flow run's columns (of f), as storage/flow_records.py reads them.
       f.id, f.project_id, f.flow_id, f.flow_revision, f.status, f.ended_reason,
       f.idempotency_key, f.requested_by, f.parameters::text AS parameters, f.created_at_ms,
       f.deadline_at_ms, f.finished_at_ms, f.trigger_id, f.scheduled_for_ms

-- name: flow_current
-- A flow's current revision.
SELECT
-- include: flow_revision_columns
FROM qinglong.flows h
JOIN qinglong.flow_revisions r
  ON r.project_id = h.project_id AND r.flow_id = h.flow_id AND r.revision = h.current_revision
WHERE h.project_id = %(project_id)s AND h.flow_id = %(flow_id)s;

-- name: flow_revision_get
-- One revision of a flow.
SELECT
-- include: flow_revision_columns
FROM qinglong.flow_revisions r
WHERE r.project_id = %(project_id)s AND r.flow_id = %(flow_id)s AND r.revision = %(revision)s;

-- name: flow_list
-- A project's flows at their current revision, by id.
SELECT
-- include: flow_revision_columns
FROM qinglong.flows h
JOIN qinglong.flow_revisions r
  ON r.project_id = h.project_id AND r.flow_id = h.flow_id AND r.revision = h.current_revision
WHERE h.project_id = %(project_id)s
ORDER BY h.flow_id;

-- name: flow_head_insert
INSERT INTO qinglong.flows (project_id, flow_id, current_revision, created_at_ms, updated_at_ms)
VALUES (%(project_id)s, %(flow_id)s, 1, %(now_ms)s, %(now_ms)s);

-- name: flow_head_advance
-- Point the head at the next revision (compare-and-set on the one read).
UPDATE qinglong.flows SET current_revision = %(revision)s, updated_at_ms = %(now_ms)s
WHERE project_id = %(project_id)s AND flow_id = %(flow_id)s
  AND current_revision = %(revision)s - 1
RETURNING flow_id;

-- name: flow_revision_insert
INSERT INTO qinglong.flow_revisions (project_id, flow_id, revision, name, spec_json, pins_json,
                                     content_digest, created_at_ms)
VALUES (%(project_id)s, %(flow_id)s, %(revision)s, %(name)s, %(spec_json)s::jsonb,
        %(pins_json)s::jsonb, %(content_digest)s, %(now_ms)s);

-- name: flow_run_by_key
-- The flow run a client request started, by its key (unique within a project).
SELECT id, flow_id, parameters::text AS parameters
FROM qinglong.flow_runs
WHERE project_id = %(project_id)s AND idempotency_key = %(key)s;

-- name: flow_run_insert
INSERT INTO qinglong.flow_runs (id, project_id, flow_id, flow_revision, status, idempotency_key,
                                requested_by, parameters, created_at_ms, deadline_at_ms,
                                trigger_id, trigger_revision, scheduled_for_ms, claim_version,
                                claim_token)
VALUES (%(id)s, %(project_id)s, %(flow_id)s, %(flow_revision)s, 'running', %(idempotency_key)s,
        %(requested_by)s, %(parameters)s::jsonb, %(now_ms)s, %(deadline_at_ms)s,
        %(trigger_id)s, %(trigger_revision)s, %(scheduled_for_ms)s, %(claim_version)s,
        %(claim_token)s);

-- name: flow_step_insert
INSERT INTO qinglong.flow_steps (flow_run_id, node_id, status, run_id, released_at_ms)
VALUES (%(flow_run_id)s, %(node_id)s, %(status)s, %(run_id)s, %(released_at_ms)s);

-- name: flow_steps_of_runs
-- The flow step each of these Runs (an array of ids) was released as, if any.
SELECT flow_run_id, node_id, run_id FROM qinglong.flow_steps
WHERE run_id = ANY (%(run_ids)s::text[])
ORDER BY flow_run_id, node_id;

-- name: flow_run_lock
-- A flow run, locked: the mutex of its progress.
SELECT
-- include: flow_run_columns
FROM qinglong.flow_runs f WHERE f.id = %(flow_run_id)s FOR UPDATE;

-- name: flow_run_get
-- A flow run, unlocked.
SELECT
-- include: flow_run_columns
FROM qinglong.flow_runs f WHERE f.id = %(flow_run_id)s;

-- name: flow_run_find
-- The flow runs whose id starts with a prefix (at most two: one is a match, two ambiguous).
SELECT id FROM qinglong.flow_runs WHERE id LIKE %(prefix)s || '%%' ORDER BY id LIMIT 2;

-- name: flow_runs_list
-- A project's flow runs (of one flow, or all), newest first.
SELECT
-- include: flow_run_columns
FROM qinglong.flow_runs f
WHERE f.project_id = %(project_id)s AND (%(flow_id)s::text IS NULL OR f.flow_id = %(flow_id)s)
ORDER BY f.created_at_ms DESC, f.id DESC
LIMIT %(limit)s;

-- name: flow_steps_get
-- Every step of a flow run with its Run's status (if released), by node id.
SELECT s.node_id, s.status, s.run_id, s.released_at_ms, s.ended_at_ms, s.error_summary,
       r.status AS run_status, r.cancel_requested_at_ms IS NOT NULL AS cancel_requested
FROM qinglong.flow_steps s
LEFT JOIN qinglong.runs r ON r.id = s.run_id
WHERE s.flow_run_id = %(flow_run_id)s
ORDER BY s.node_id;

-- name: flow_step_release
-- A pending step released as a Run.
UPDATE qinglong.flow_steps SET status = 'released', run_id = %(run_id)s,
       released_at_ms = %(now_ms)s
WHERE flow_run_id = %(flow_run_id)s AND node_id = %(node_id)s AND status = 'pending'
RETURNING node_id;

-- name: flow_step_end
-- A released step ends with its Run's outcome (succeeded or failed).
UPDATE qinglong.flow_steps SET status = %(status)s, ended_at_ms = %(now_ms)s
WHERE flow_run_id = %(flow_run_id)s AND node_id = %(node_id)s AND status = 'released'
RETURNING node_id;

-- name: flow_step_skip
-- A pending step that will never run (error: why, when it could not be admitted).
UPDATE qinglong.flow_steps SET status = 'skipped', ended_at_ms = %(now_ms)s, error_summary = %(error)s
WHERE flow_run_id = %(flow_run_id)s AND node_id = %(node_id)s AND status = 'pending'
RETURNING node_id;

-- name: flow_run_end
-- A running flow run ends.
UPDATE qinglong.flow_runs SET status = %(status)s, ended_reason = %(reason)s,
       finished_at_ms = %(now_ms)s
WHERE id = %(flow_run_id)s AND status = 'running'
RETURNING id;

-- name: flow_runs_overdue
-- Running flow runs whose timeout has passed, oldest deadline first.
SELECT id FROM qinglong.flow_runs
WHERE status = 'running' AND deadline_at_ms IS NOT NULL
  AND deadline_at_ms <= (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint
ORDER BY deadline_at_ms, id
LIMIT %(limit)s;

-- name: flow_cancel_lock_runs
-- The Runs of a flow run's released steps (an array of ids), locked in id order: a cancel
-- takes them before the flow run, as every lifecycle step does.
SELECT id FROM qinglong.runs WHERE id = ANY (%(run_ids)s::text[]) ORDER BY id FOR UPDATE;

-- name: flow_triggers_of_flow
-- The triggers (not deleted) whose current revision starts this flow, with their specs (a
-- flow publish checks the values they give against the revision it writes).
SELECT r.trigger_id, r.spec_json::text AS spec_json
FROM qinglong.triggers h
JOIN qinglong.trigger_revisions r
  ON r.project_id = h.project_id AND r.trigger_id = h.trigger_id
 AND r.revision = h.current_revision
WHERE h.project_id = %(project_id)s AND h.deleted_at_ms IS NULL
  AND r.spec_json -> 'config' ->> 'flow' = %(flow_id)s
ORDER BY r.trigger_id;
