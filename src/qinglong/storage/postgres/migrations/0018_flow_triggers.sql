-- A trigger may start a flow (issue 21, docs/controls/flows.md): the flow run an occurrence
-- starts records which trigger revision, which occurrence and under which claim (the audit's
-- evidence that the occurrence was admitted once, as a Run's run.created records it).
ALTER TABLE qinglong.flow_runs
    ADD COLUMN trigger_id       varchar(128),
    ADD COLUMN trigger_revision integer,
    ADD COLUMN scheduled_for_ms bigint,
    ADD COLUMN claim_version    integer,
    ADD COLUMN claim_token      varchar(64),
    ADD CONSTRAINT flow_runs_occurrence_shape CHECK (
        (trigger_id IS NULL) = (trigger_revision IS NULL)
        AND (trigger_id IS NULL) = (scheduled_for_ms IS NULL));

-- The audit reads the flow runs of occurrences in its window.
CREATE INDEX flow_runs_occurrence_idx ON qinglong.flow_runs (scheduled_for_ms)
    WHERE trigger_id IS NOT NULL;
