-- A trigger may start a flow (issue 21, docs/controls/flows.md): the flow run an occurrence
-- starts records which trigger revision, which occurrence and under which claim (on SQLite the
-- claim is the schedule row's state version).
ALTER TABLE flow_runs ADD COLUMN trigger_id TEXT;
ALTER TABLE flow_runs ADD COLUMN trigger_revision INTEGER;
ALTER TABLE flow_runs ADD COLUMN scheduled_for_ms INTEGER;
ALTER TABLE flow_runs ADD COLUMN claim_version INTEGER;
ALTER TABLE flow_runs ADD COLUMN claim_token TEXT;

CREATE INDEX flow_runs_occurrence_idx ON flow_runs (scheduled_for_ms)
    WHERE trigger_id IS NOT NULL;
