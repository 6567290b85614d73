-- Fewer index writes per occurrence (issue 20). Every admission inserts a Run, an Attempt
-- and two events, and every lifecycle step rewrites the Run and its Attempt; PostgreSQL
-- writes a new entry into every index of the table for each row version that changes an
-- indexed column (status always does), so each index costs a write per step. These were
-- written on every step and read by no statement:
--
-- * trigger_schedules_claim_expiry_idx: no statement walks claims by expiry (a claimable
--   row is found along the due index and its claim checked as a filter). Without it, a
--   claim changes no indexed column, so with room on the page (fillfactor 70) the claim is
--   a heap-only update: no index entry at all, where it wrote three.
-- * runs_status_idx (every Run, every status): the statements that look for Runs by status
--   ask for queued Runs (runs_queued_idx below, the shape SQLite already has), Runs being
--   executed (runs_active_task_idx has exactly that predicate) or Runs waiting to retry
--   (runs_retry_due_idx). Only the admission writes runs_queued_idx now; a step out of
--   queued writes nothing to it.
-- * runs_finished_idx held a NULL entry for every Run not ended: it now holds ended Runs
--   only (the retention sweep asks for finished_at_ms below a horizon, which implies it).
-- * run_attempts_status_idx: every statement that looks for Attempts by status asks for
--   the active ones, which run_attempts_active_idx (lease_expires_at_ms, id WHERE status is
--   claimed, starting or running) serves; an Attempt's steps wrote it four times.
DROP INDEX qinglong.trigger_schedules_claim_expiry_idx;
ALTER TABLE qinglong.trigger_schedules SET (fillfactor = 70);

DROP INDEX qinglong.runs_status_idx;
CREATE INDEX runs_queued_idx ON qinglong.runs (queued_at_ms, id) WHERE status = 'queued';

DROP INDEX qinglong.runs_finished_idx;
CREATE INDEX runs_finished_idx ON qinglong.runs (finished_at_ms, id)
    WHERE finished_at_ms IS NOT NULL;

DROP INDEX qinglong.run_attempts_status_idx;
