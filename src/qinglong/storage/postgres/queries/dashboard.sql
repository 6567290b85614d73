-- The dashboard's summary of triggers (storage/dashboard.py): one page of current triggers
-- and, for each, what its latest Runs say. One statement per page, whatever the number of
-- triggers: each trigger's Runs are read along runs_trigger_idx (project_id, trigger_id,
-- scheduled_for_ms), newest occurrence first, at most %(window)s of them.

-- name: trigger_summary_page
-- A page of current triggers (of one project, of the projects in a JSON array, or all; with one
-- label, when it is given; only, or all but, the [project, trigger] pairs of a JSON array, when it
-- is given: a user's pins first) after the key (after_project, after_trigger), in (project,
-- trigger) order, with their schedule rows (as trigger_list has them); from each trigger's latest
-- %(window)s Runs by occurrence: the outcome counts (a lost Run is a failure, a Run its overlap
-- policy ended is skipped: service/stats.py) and the largest admission lag of a Run the scheduler
-- admitted (not run now, not backfilled); and its latest Run (l_).
WITH page AS (
    SELECT h.project_id, h.trigger_id, h.current_revision, h.deleted_at_ms
    FROM qinglong.triggers h
    WHERE (%(project_id)s::varchar IS NULL OR h.project_id = %(project_id)s::varchar)
      AND (%(projects)s::jsonb IS NULL
           OR h.project_id IN (SELECT jsonb_array_elements_text(%(projects)s::jsonb)))
      AND (%(label)s::varchar IS NULL OR EXISTS (
             SELECT 1 FROM qinglong.trigger_labels b
              WHERE b.project_id = h.project_id AND b.trigger_id = h.trigger_id
                AND b.label = %(label)s::varchar))
      AND (%(only)s::jsonb IS NULL OR (h.project_id, h.trigger_id) IN (
             SELECT k ->> 0, k ->> 1 FROM jsonb_array_elements(%(only)s::jsonb) k))
      AND (%(skip)s::jsonb IS NULL OR (h.project_id, h.trigger_id) NOT IN (
             SELECT k ->> 0, k ->> 1 FROM jsonb_array_elements(%(skip)s::jsonb) k))
      AND h.deleted_at_ms IS NULL
      AND (%(after_project)s::varchar IS NULL
           OR (h.project_id, h.trigger_id)
              > (%(after_project)s::varchar, %(after_trigger)s::varchar))
    ORDER BY h.project_id, h.trigger_id
    LIMIT %(limit)s
)
SELECT r.*,
       s.trigger_revision AS s_trigger_revision, s.next_fire_at_ms AS s_next_fire_at_ms,
       s.last_scheduled_at_ms AS s_last_scheduled_at_ms, s.state_version AS s_state_version,
       s.updated_at_ms AS s_updated_at_ms, s.claim_owner AS s_claim_owner,
       s.claim_version AS s_claim_version, s.claim_expires_at_ms AS s_claim_expires_at_ms,
       s.paused_from_ms AS s_paused_from_ms, s.paused_until_ms AS s_paused_until_ms,
       (SELECT z.reason FROM qinglong.trigger_pauses z
         WHERE z.project_id = h.project_id AND z.trigger_id = h.trigger_id
           AND z.paused_at_ms = s.paused_from_ms) AS pause_reason,
       (th.current_revision = r.task_revision) AS task_pin_current,
       (p.status = 'active') AS project_active,
       h.deleted_at_ms AS h_deleted_at_ms,
       w.runs AS w_runs, w.successes AS w_successes, w.failures AS w_failures,
       w.cancelled AS w_cancelled, w.skipped AS w_skipped, w.max_lag_ms AS w_max_lag_ms,
       l.id AS l_id, l.status AS l_status, l.trigger_type AS l_trigger_type,
       l.scheduled_for_ms AS l_scheduled_for_ms, l.created_at_ms AS l_created_at_ms,
       l.started_at_ms AS l_started_at_ms, l.finished_at_ms AS l_finished_at_ms
FROM page h
JOIN qinglong.trigger_revisions r
  ON r.project_id = h.project_id AND r.trigger_id = h.trigger_id AND r.revision = h.current_revision
JOIN qinglong.task_definitions th ON th.project_id = r.project_id AND th.task_id = r.task_id
JOIN qinglong.projects p ON p.id = h.project_id
LEFT JOIN qinglong.trigger_schedules s
  ON s.project_id = h.project_id AND s.trigger_id = h.trigger_id
CROSS JOIN LATERAL (
    SELECT count(*) AS runs,
           count(*) FILTER (WHERE y.status = 'succeeded') AS successes,
           count(*) FILTER (WHERE y.status IN ('failed', 'timed_out', 'lost')) AS failures,
           count(*) FILTER (WHERE y.status = 'cancelled'
                              AND y.cancel_reason IS DISTINCT FROM 'policy') AS cancelled,
           count(*) FILTER (WHERE y.status = 'cancelled' AND y.cancel_reason = 'policy')
               AS skipped,
           max(y.created_at_ms - y.scheduled_for_ms)
               FILTER (WHERE y.trigger_type NOT IN ('manual', 'backfill')) AS max_lag_ms
    FROM (SELECT x.status, x.cancel_reason, x.trigger_type, x.created_at_ms,
                 x.scheduled_for_ms
          FROM qinglong.runs x
          WHERE x.project_id = h.project_id AND x.trigger_id = h.trigger_id
            AND x.scheduled_for_ms IS NOT NULL
          ORDER BY x.scheduled_for_ms DESC, x.id DESC
          LIMIT %(window)s) y
) w
LEFT JOIN LATERAL (
    SELECT x.id, x.status, x.trigger_type, x.scheduled_for_ms, x.created_at_ms,
           x.started_at_ms, x.finished_at_ms
    FROM qinglong.runs x
    WHERE x.project_id = h.project_id AND x.trigger_id = h.trigger_id
      AND x.scheduled_for_ms IS NOT NULL
    ORDER BY x.scheduled_for_ms DESC, x.id DESC
    LIMIT 1
) l ON true
ORDER BY h.project_id, h.trigger_id;
