-- Column lists both dialects select under the same aliases, for the mappers that read them
-- (storage/records.py, storage/notify/writer.py). Fragments only: no statement arguments and
-- no table names, which the dialects write differently (see storage/sqlfile.py).

-- fragment: trigger_revision_columns
-- The trigger revision a schedule row is pinned to (``tr``), as ``t_`` columns
-- (records.candidate_trigger_revision). The last of a select list. The JSON documents of
-- this fragment and the next come as text, on PostgreSQL too: the reader parses one only
-- when it has not verified the same stored text before (admission/claims.py, pinned.py), so
-- a batch does not decode the same revision once per row.
       tr.revision AS t_revision, tr.task_id AS t_task_id, tr.task_revision AS t_task_revision,
       tr.task_content_digest AS t_task_content_digest,
       CAST(tr.spec_json AS text) AS t_spec_json,
       tr.enabled AS t_enabled, tr.content_digest AS t_content_digest,
       tr.created_at_ms AS t_created_at_ms

-- fragment: revision_facts_columns
-- The task revision a batch row pins (``kr``, as ``k_`` columns: records.candidate_task_revision)
-- and the execution revision pinned to that (``x``, as ``e_`` columns), for the rows whose
-- revisions the committer has not verified yet (admission/pinned.py; NULL for the others).
-- Ends with a comma: the trigger revision's columns follow.
       kr.task_id AS k_task_id, kr.revision AS k_revision, kr.name AS k_name, kr.kind AS k_kind,
       CAST(kr.spec_json AS text) AS k_spec_json, kr.enabled AS k_enabled,
       kr.content_digest AS k_content_digest, kr.created_at_ms AS k_created_at_ms,
       x.project_id AS e_project_id, x.task_id AS e_task_id,
       x.source_revision AS e_source_revision, x.source_content_digest AS e_source_content_digest,
       x.task_revision AS e_task_revision, x.executor_type AS e_executor_type,
       x.plan_schema AS e_plan_schema, CAST(x.plan_json AS text) AS e_plan_json,
       x.content_digest AS e_content_digest, x.created_at_ms AS e_created_at_ms,

-- fragment: run_outcome_columns
-- A Run outcome event (``e``) of a Run (``r``) that a channel (``c``) is to be told of
-- (notify/writer.py reads them).
SELECT e.id AS event_id, e.type AS event_type, e.created_at_ms AS occurred_at_ms,
       e.payload AS event_payload, r.id AS run_id, r.project_id, r.task_id, r.trigger_id,
       r.task_name, r.execution_origin, r.triggered_by, r.scheduled_for_ms,
       r.created_at_ms AS run_created_at_ms, r.started_at_ms, r.finished_at_ms,
       r.attempts_spent, r.error_code, r.error_summary, r.cancel_reason,
       c.name AS channel, c.kind, c.config_json
