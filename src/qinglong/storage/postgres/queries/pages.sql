-- Run reads by filter (storage/runs/reader.py, pages.py): pages of Runs after a cursor (the
-- first page without one: `ql run list`), and per-task counts of Runs in time buckets.

-- fragment: run_page_filtered
-- The Runs (with the exit code of their latest Attempt) that the filters of a page keep;
-- each page adds its cursor and order.
SELECT r.*,
       (SELECT a.exit_code FROM qinglong.run_attempts a WHERE a.run_id = r.id
         ORDER BY a.attempt DESC LIMIT 1) AS exit_code
FROM qinglong.runs r
WHERE (%(project_id)s::varchar IS NULL OR r.project_id = %(project_id)s::varchar)
  AND (%(projects)s::jsonb IS NULL
       OR r.project_id IN (SELECT jsonb_array_elements_text(%(projects)s::jsonb)))
  AND (%(task_id)s::varchar IS NULL OR r.task_id = %(task_id)s::varchar)
  AND (%(trigger_id)s::varchar IS NULL OR r.trigger_id = %(trigger_id)s::varchar)
  AND (%(status)s::varchar IS NULL OR r.status = %(status)s::varchar)
  AND (%(since_ms)s::bigint IS NULL
       OR coalesce(r.scheduled_for_ms, r.created_at_ms) >= %(since_ms)s::bigint)
  AND (%(until_ms)s::bigint IS NULL
       OR coalesce(r.scheduled_for_ms, r.created_at_ms) < %(until_ms)s::bigint)

-- name: run_page_newest_first
-- A page of Runs newest first, after the Run (after_ms, after_id) when given. The time of a
-- Run is its occurrence (or, for a Run of no occurrence, when it was created).
-- include: run_page_filtered
  AND (%(after_ms)s::bigint IS NULL
       OR (coalesce(r.scheduled_for_ms, r.created_at_ms), r.id)
          < (%(after_ms)s::bigint, %(after_id)s::varchar))
ORDER BY coalesce(r.scheduled_for_ms, r.created_at_ms) DESC, r.id DESC
LIMIT %(limit)s;

-- name: run_page_oldest_first
-- The same, oldest first.
-- include: run_page_filtered
  AND (%(after_ms)s::bigint IS NULL
       OR (coalesce(r.scheduled_for_ms, r.created_at_ms), r.id)
          > (%(after_ms)s::bigint, %(after_id)s::varchar))
ORDER BY coalesce(r.scheduled_for_ms, r.created_at_ms) ASC, r.id ASC
LIMIT %(limit)s;

-- name: run_buckets
-- Per task and bucket of admission time: counts by outcome and durations. A lost Run is
-- a failure; a Run an overlap policy ended (cancelled, reason policy) is skipped: neither
-- a success nor a failure nor a cancellation.
SELECT task_id, (created_at_ms / %(bucket_ms)s::bigint) * %(bucket_ms)s::bigint
           AS bucket_start_ms,
       count(*) AS runs,
       count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE status IN ('failed', 'timed_out', 'lost')) AS failed,
       count(*) FILTER (WHERE status = 'cancelled'
                          AND cancel_reason IS DISTINCT FROM 'policy') AS cancelled,
       count(*) FILTER (WHERE status = 'cancelled' AND cancel_reason = 'policy') AS skipped,
       coalesce(sum(finished_at_ms - started_at_ms), 0) AS total_duration_ms,
       max(finished_at_ms - started_at_ms) AS max_duration_ms
FROM qinglong.runs
WHERE project_id = %(project_id)s
  AND (%(task_id)s::varchar IS NULL OR task_id = %(task_id)s::varchar)
  AND created_at_ms >= %(from_ms)s AND created_at_ms < %(to_ms)s
GROUP BY task_id, bucket_start_ms
ORDER BY task_id, bucket_start_ms
LIMIT %(limit)s;
