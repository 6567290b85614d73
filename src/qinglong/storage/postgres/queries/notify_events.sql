-- name: notify_progress_page
-- The times of Run starts (an attempt's) and successes after a position (one page, oldest
-- first), from the first rule that asks for 'started' or 'succeeded' on: none, no page (a
-- dispatcher looks at them only while a rule asks; run_events_progress_idx).
SELECT created_at_ms AS at_ms FROM qinglong.run_events
WHERE type IN ('attempt.running', 'run.succeeded')
  AND created_at_ms > %(after_ms)s AND created_at_ms <= %(upto_ms)s
  AND created_at_ms >= (SELECT min(created_at_ms) FROM qinglong.notify_rules
                        WHERE event IN ('started', 'succeeded'))
ORDER BY created_at_ms LIMIT %(limit)s;

-- name: notify_progress_match
-- Run starts and successes in (after, upto] that a rule wants and no outbox row holds yet,
-- per channel (one per Run: the key is the event and the Run, not the attempt).
-- include: run_outcome_columns
FROM qinglong.run_events e
JOIN qinglong.runs r ON r.id = e.run_id
JOIN qinglong.notify_rules n ON n.project_id = r.project_id AND n.task_id IN ('*', r.task_id)
     AND n.event = CASE e.type WHEN 'run.succeeded' THEN 'succeeded' ELSE 'started' END
     AND n.created_at_ms <= e.created_at_ms
JOIN qinglong.notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
WHERE e.type IN ('attempt.running', 'run.succeeded')
  AND e.created_at_ms > %(after_ms)s AND e.created_at_ms <= %(upto_ms)s
  AND NOT EXISTS (SELECT 1 FROM qinglong.notify_outbox o
                  WHERE o.channel = c.name AND o.source_key = 'run.' || n.event || ':' || r.id)
ORDER BY e.created_at_ms, e.id, c.name;

-- name: notify_running_long_page
-- One page of the walk over the running Runs whose attempt started at least the shortest
-- delay of any 'running_long' rule ago (none: no page), oldest start first after a position
-- (status IN (...) names runs_active_task_idx: only Runs being executed), each with every
-- channel in use whose rule covers it, whose delay it has run out, and that has no outbox
-- row for it yet (none: one row with a NULL channel, so the page's end is known).
WITH page AS (
    SELECT r.id, r.project_id, r.task_id, r.trigger_id, r.task_name, r.execution_origin,
           r.triggered_by, r.scheduled_for_ms, r.created_at_ms, r.attempts_spent,
           r.started_at_ms AS since_ms, r.started_at_ms AS pos_ms
    FROM qinglong.runs r
    WHERE r.status IN ('dispatching', 'running') AND r.status = 'running'
      AND r.started_at_ms IS NOT NULL
      AND (r.started_at_ms, r.id) > (%(after_ms)s::bigint, %(after_id)s::varchar)
      AND r.started_at_ms <= %(now_ms)s::bigint - (
          SELECT min(n.after_ms) FROM qinglong.notify_rules n
          JOIN qinglong.notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
          WHERE n.event = 'running_long')
    ORDER BY r.started_at_ms, r.id LIMIT %(limit)s
)
SELECT p.*, w.channel, w.kind, w.config_json, w.after_ms
FROM page p
LEFT JOIN (SELECT n.project_id, n.task_id, n.after_ms, c.name AS channel, c.kind,
                  c.config_json
           FROM qinglong.notify_rules n
           JOIN qinglong.notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
           WHERE n.event = 'running_long') w
     ON w.project_id = p.project_id AND w.task_id IN ('*', p.task_id)
    AND p.since_ms <= %(now_ms)s::bigint - w.after_ms
    AND NOT EXISTS (SELECT 1 FROM qinglong.notify_outbox o
                    WHERE o.channel = w.channel AND o.source_key = 'run.running_long:' || p.id)
ORDER BY p.pos_ms, p.id, w.after_ms, w.channel;

-- name: notify_late_start_page
-- One page of the walk over the queued Runs never started whose scheduled time (a manual
-- Run: its creation) lies at least the shortest delay of any 'late_start' rule ago (none: no
-- page), along runs_queued_idx after a position, each with the channels that still owe it
-- a notification (as notify_running_long_page).
WITH page AS (
    SELECT r.id, r.project_id, r.task_id, r.trigger_id, r.task_name, r.execution_origin,
           r.triggered_by, r.scheduled_for_ms, r.created_at_ms, r.attempts_spent,
           coalesce(r.scheduled_for_ms, r.created_at_ms) AS since_ms, r.queued_at_ms AS pos_ms
    FROM qinglong.runs r
    WHERE r.status = 'queued' AND r.started_at_ms IS NULL
      AND (r.queued_at_ms, r.id) > (%(after_ms)s::bigint, %(after_id)s::varchar)
      AND coalesce(r.scheduled_for_ms, r.created_at_ms) <= %(now_ms)s::bigint - (
          SELECT min(n.after_ms) FROM qinglong.notify_rules n
          JOIN qinglong.notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
          WHERE n.event = 'late_start')
    ORDER BY r.queued_at_ms, r.id LIMIT %(limit)s
)
SELECT p.*, w.channel, w.kind, w.config_json, w.after_ms
FROM page p
LEFT JOIN (SELECT n.project_id, n.task_id, n.after_ms, c.name AS channel, c.kind,
                  c.config_json
           FROM qinglong.notify_rules n
           JOIN qinglong.notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
           WHERE n.event = 'late_start') w
     ON w.project_id = p.project_id AND w.task_id IN ('*', p.task_id)
    AND p.since_ms <= %(now_ms)s::bigint - w.after_ms
    AND NOT EXISTS (SELECT 1 FROM qinglong.notify_outbox o
                    WHERE o.channel = w.channel AND o.source_key = 'run.late_start:' || p.id)
ORDER BY p.pos_ms, p.id, w.after_ms, w.channel;
