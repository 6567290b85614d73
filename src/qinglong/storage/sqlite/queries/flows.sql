-- Flows (docs/controls/flows.md): publishing, starting and cancelling flow runs, and
-- releasing their steps in the transaction that ends a node's Run (PostgreSQL's flows.sql
-- has the locking; here one process writes the file, in BEGIN IMMEDIATE transactions).

-- fragment: flow_revision_columns
-- A flow revision's columns (of r), as storage/flow_records.py reads them.
       r.project_id, r.flow_id, r.revision, r.name, r.spec_json AS spec_json,
       r.pins_json AS pins_json, r.content_digest, r.created_at_ms

-- fragment: flow_run_columns
-- A flow run's columns (of f), as storage/flow_records.py reads them.
       f.id, f.project_id, f.flow_id, f.flow_revision, f.status, f.ended_reason,
       f.idempotency_key, f.requested_by, f.parameters AS parameters, f.created_at_ms,
       f.deadline_at_ms, f.finished_at_ms, f.trigger_id, f.scheduled_for_ms

-- name: flow_current
-- A flow's current revision.
SELECT
-- include: flow_revision_columns
FROM flows h
JOIN flow_revisions r
  ON r.project_id = h.project_id AND r.flow_id = h.flow_id AND r.revision = h.current_revision
WHERE h.project_id = :project_id AND h.flow_id = :flow_id;

-- name: flow_revision_get
-- One revision of a flow.
SELECT
-- include: flow_revision_columns
FROM flow_revisions r
WHERE r.project_id = :project_id AND r.flow_id = :flow_id AND r.revision = :revision;

-- name: flow_list
-- A project's flows at their current revision, by id.
SELECT
-- include: flow_revision_columns
FROM flows h
JOIN flow_revisions r
  ON r.project_id = h.project_id AND r.flow_id = h.flow_id AND r.revision = h.current_revision
WHERE h.project_id = :project_id
ORDER BY h.flow_id;

-- name: flow_head_insert
INSERT INTO flows (project_id, flow_id, current_revision, created_at_ms, updated_at_ms)
VALUES (:project_id, :flow_id, 1, :now_ms, :now_ms);

-- name: flow_head_advance
-- Point the head at the next revision (compare-and-set on the one read).
UPDATE flows SET current_revision = :revision, updated_at_ms = :now_ms
WHERE project_id = :project_id AND flow_id = :flow_id
  AND current_revision = :revision - 1
RETURNING flow_id;

-- name: flow_revision_insert
INSERT INTO flow_revisions (project_id, flow_id, revision, name, spec_json, pins_json,
                                     content_digest, created_at_ms)
VALUES (:project_id, :flow_id, :revision, :name, :spec_json,
        :pins_json, :content_digest, :now_ms);

-- name: flow_run_by_key
-- The flow run a client request started, by its key (unique within a project).
SELECT id, flow_id, parameters AS parameters
FROM flow_runs
WHERE project_id = :project_id AND idempotency_key = :key;

-- name: flow_run_insert
INSERT INTO flow_runs (id, project_id, flow_id, flow_revision, status, idempotency_key,
                                requested_by, parameters, created_at_ms, deadline_at_ms,
                                trigger_id, trigger_revision, scheduled_for_ms, claim_version,
                                claim_token)
VALUES (:id, :project_id, :flow_id, :flow_revision, 'running', :idempotency_key,
        :requested_by, :parameters, :now_ms, :deadline_at_ms,
        :trigger_id, :trigger_revision, :scheduled_for_ms, :claim_version, :claim_token);

-- name: flow_step_insert
INSERT INTO flow_steps (flow_run_id, node_id, status, run_id, released_at_ms)
VALUES (:flow_run_id, :node_id, :status, :run_id, :released_at_ms);

-- name: flow_steps_of_runs
-- The flow step each of these Runs (an array of ids) was released as, if any.
SELECT flow_run_id, node_id, run_id FROM flow_steps
WHERE run_id IN (SELECT value FROM json_each(:run_ids))
ORDER BY flow_run_id, node_id;

-- name: flow_run_lock
-- A flow run (the write transaction already holds the file's lock).
SELECT
-- include: flow_run_columns
FROM flow_runs f WHERE f.id = :flow_run_id;

-- name: flow_run_get
-- A flow run, unlocked.
SELECT
-- include: flow_run_columns
FROM flow_runs f WHERE f.id = :flow_run_id;

-- name: flow_run_find
-- The flow runs whose id starts with a prefix (at most two: one is a match, two ambiguous).
SELECT id FROM flow_runs WHERE id LIKE :prefix || '%' ORDER BY id LIMIT 2;

-- name: flow_runs_list
-- A project's flow runs (of one flow, or all), newest first.
SELECT
-- include: flow_run_columns
FROM flow_runs f
WHERE f.project_id = :project_id AND (:flow_id IS NULL OR f.flow_id = :flow_id)
ORDER BY f.created_at_ms DESC, f.id DESC
LIMIT :limit;

-- name: flow_steps_get
-- Every step of a flow run with its Run's status (if released), by node id.
SELECT s.node_id, s.status, s.run_id, s.released_at_ms, s.ended_at_ms, s.error_summary,
       r.status AS run_status, r.cancel_requested_at_ms IS NOT NULL AS cancel_requested
FROM flow_steps s
LEFT JOIN runs r ON r.id = s.run_id
WHERE s.flow_run_id = :flow_run_id
ORDER BY s.node_id;

-- name: flow_step_release
-- A pending step released as a Run.
UPDATE flow_steps SET status = 'released', run_id = :run_id,
       released_at_ms = :now_ms
WHERE flow_run_id = :flow_run_id AND node_id = :node_id AND status = 'pending'
RETURNING node_id;

-- name: flow_step_end
-- A released step ends with its Run's outcome (succeeded or failed).
UPDATE flow_steps SET status = :status, ended_at_ms = :now_ms
WHERE flow_run_id = :flow_run_id AND node_id = :node_id AND status = 'released'
RETURNING node_id;

-- name: flow_step_skip
-- A pending step that will never run (error: why, when it could not be admitted).
UPDATE flow_steps SET status = 'skipped', ended_at_ms = :now_ms, error_summary = :error
WHERE flow_run_id = :flow_run_id AND node_id = :node_id AND status = 'pending'
RETURNING node_id;

-- name: flow_run_end
-- A running flow run ends.
UPDATE flow_runs SET status = :status, ended_reason = :reason,
       finished_at_ms = :now_ms
WHERE id = :flow_run_id AND status = 'running'
RETURNING id;

-- name: flow_runs_overdue
-- Running flow runs whose timeout has passed, oldest deadline first.
SELECT id FROM flow_runs
WHERE status = 'running' AND deadline_at_ms IS NOT NULL
  AND deadline_at_ms <= :now_ms
ORDER BY deadline_at_ms, id
LIMIT :limit;

-- name: flow_cancel_lock_runs
-- The Runs of a flow run's released steps (the write transaction already holds the file).
SELECT id FROM runs WHERE id IN (SELECT value FROM json_each(:run_ids)) ORDER BY id;

-- name: flow_triggers_of_flow
-- The triggers (not deleted) whose current revision starts this flow, with their specs (a
-- flow publish checks the values they give against the revision it writes).
SELECT r.trigger_id, r.spec_json AS spec_json
FROM triggers h
JOIN trigger_revisions r
  ON r.project_id = h.project_id AND r.trigger_id = h.trigger_id
 AND r.revision = h.current_revision
WHERE h.project_id = :project_id AND h.deleted_at_ms IS NULL
  AND json_extract(r.spec_json, '$.config.flow') = :flow_id
ORDER BY r.trigger_id;
