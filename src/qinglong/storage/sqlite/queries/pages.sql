-- Run reads by filter (storage/runs/reader.py, pages.py): pages of Runs after a cursor (the
-- first page without one: `ql run list`), and per-task counts of Runs in time buckets.

-- fragment: run_page_filtered
-- The Runs (with the exit code of their latest Attempt) that the filters of a page keep;
-- each page adds its cursor and order.
SELECT r.*,
       (SELECT a.exit_code FROM run_attempts a WHERE a.run_id = r.id
         ORDER BY a.attempt DESC LIMIT 1) AS exit_code
FROM runs r
WHERE (:project_id IS NULL OR r.project_id = :project_id)
  AND (:projects IS NULL OR r.project_id IN (SELECT value FROM json_each(:projects)))
  AND (:task_id IS NULL OR r.task_id = :task_id)
  AND (:trigger_id IS NULL OR r.trigger_id = :trigger_id)
  AND (:status IS NULL OR r.status = :status)
  AND (:since_ms IS NULL OR coalesce(r.scheduled_for_ms, r.created_at_ms) >= :since_ms)
  AND (:until_ms IS NULL OR coalesce(r.scheduled_for_ms, r.created_at_ms) < :until_ms)

-- name: run_page_newest_first
-- A page of Runs newest first, after the Run (after_ms, after_id) when given. The time of a
-- Run is its occurrence (or, for a Run of no occurrence, when it was created).
-- include: run_page_filtered
  AND (:after_ms IS NULL OR coalesce(r.scheduled_for_ms, r.created_at_ms) < :after_ms
       OR (coalesce(r.scheduled_for_ms, r.created_at_ms) = :after_ms AND r.id < :after_id))
ORDER BY coalesce(r.scheduled_for_ms, r.created_at_ms) DESC, r.id DESC
LIMIT :limit;

-- name: run_page_oldest_first
-- The same, oldest first.
-- include: run_page_filtered
  AND (:after_ms IS NULL OR coalesce(r.scheduled_for_ms, r.created_at_ms) > :after_ms
       OR (coalesce(r.scheduled_for_ms, r.created_at_ms) = :after_ms AND r.id > :after_id))
ORDER BY coalesce(r.scheduled_for_ms, r.created_at_ms) ASC, r.id ASC
LIMIT :limit;

-- name: run_buckets
-- Per task and bucket of admission time: counts by outcome and durations. A lost Run is
-- a failure; a Run an overlap policy ended (cancelled, reason policy) is skipped: neither
-- a success nor a failure nor a cancellation.
SELECT task_id, (created_at_ms / :bucket_ms) * :bucket_ms AS bucket_start_ms,
       count(*) AS runs,
       sum(CASE WHEN status = 'succeeded' THEN 1 ELSE 0 END) AS succeeded,
       sum(CASE WHEN status IN ('failed', 'timed_out', 'lost') THEN 1 ELSE 0 END) AS failed,
       sum(CASE WHEN status = 'cancelled' AND cancel_reason IS NOT 'policy' THEN 1 ELSE 0 END)
           AS cancelled,
       sum(CASE WHEN status = 'cancelled' AND cancel_reason = 'policy' THEN 1 ELSE 0 END)
           AS skipped,
       coalesce(sum(finished_at_ms - started_at_ms), 0) AS total_duration_ms,
       max(finished_at_ms - started_at_ms) AS max_duration_ms
FROM runs
WHERE project_id = :project_id AND (:task_id IS NULL OR task_id = :task_id)
  AND created_at_ms >= :from_ms AND created_at_ms < :to_ms
GROUP BY task_id, bucket_start_ms
ORDER BY task_id, bucket_start_ms
LIMIT :limit;
