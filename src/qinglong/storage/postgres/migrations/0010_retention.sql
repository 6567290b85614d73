-- Retention (docs/retention.md): every `ql control` replica deletes, in bounded batches,
-- claim records and the events of ended Runs older than --retention-days (default 30).
-- ql_runtime gets DELETE on exactly these two tables. Two indexes let a pass walk what is
-- past the horizon in order from its cursor without scanning: claims by acquisition time
-- (also how `ql audit` reads them), Runs by the time they ended.
--
-- retention_marks records, per pruned table, the latest horizon any pruner used, written in
-- the same transaction as each delete: `ql audit` reads it to tell evidence retention removed
-- (before the mark) from evidence that is missing (a violation). No mark: nothing was pruned.
-- The capability row stays as it is (no new contract for older code).
CREATE INDEX trigger_schedule_claims_acquired_idx
    ON qinglong.trigger_schedule_claims (acquired_at_ms, project_id, trigger_id, claim_version);
CREATE INDEX runs_finished_idx ON qinglong.runs (finished_at_ms, id)
    WHERE finished_at_ms IS NOT NULL;

CREATE TABLE qinglong.retention_marks (
    subject          varchar(32) PRIMARY KEY CHECK (subject IN ('claims', 'run_events')),
    pruned_before_ms bigint NOT NULL CHECK (pruned_before_ms >= 0)
);

GRANT DELETE ON qinglong.trigger_schedule_claims, qinglong.run_events TO ql_runtime;
GRANT SELECT, INSERT, UPDATE ON qinglong.retention_marks TO ql_runtime;
