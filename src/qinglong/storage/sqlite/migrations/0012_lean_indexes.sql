-- Fewer index writes per Run (issue 20; PostgreSQL's migration 0013 has the reasoning).
-- runs_status_idx held every Run and was rewritten on every status change. The statements
-- that look for Runs by status ask for queued Runs (runs_queued_idx), Runs waiting to retry
-- (runs_retry_due_idx) or Runs being executed: runs_active_task_idx, added here with the
-- predicate PostgreSQL's has, serves those, and only the steps into and out of execution
-- write it.
DROP INDEX runs_status_idx;
CREATE INDEX runs_active_task_idx ON runs (project_id, task_id)
    WHERE status IN ('dispatching', 'running');
