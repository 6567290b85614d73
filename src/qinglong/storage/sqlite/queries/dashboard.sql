-- The dashboard's summary of triggers (storage/dashboard.py): one page of current triggers
-- and, for each, what its latest Runs say. One statement per page, whatever the number of
-- triggers: each trigger's Runs are read along runs_trigger_idx (project_id, trigger_id,
-- scheduled_for_ms), newest occurrence first, at most :window of them (a correlated
-- subquery per trigger of the page: SQLite has no LATERAL).

-- name: trigger_summary_page
-- A page of current triggers after the key (after_project, after_trigger), in (project,
-- trigger) order, with their schedule rows (as trigger_list has them); from each trigger's
-- latest :window Runs by occurrence: the outcome counts (a lost Run is a failure, a Run its
-- overlap policy ended is skipped: service/stats.py) and the largest admission lag of a Run
-- the scheduler admitted (not run now, not backfilled); and its latest Run (l_).
WITH page AS (
    SELECT h.project_id, h.trigger_id, h.current_revision, h.deleted_at_ms
    FROM triggers h
    WHERE (:project_id IS NULL OR h.project_id = :project_id)
      AND h.deleted_at_ms IS NULL
      AND (:after_project IS NULL
           OR (h.project_id, h.trigger_id) > (:after_project, :after_trigger))
    ORDER BY h.project_id, h.trigger_id
    LIMIT :limit
),
facts AS (
    SELECT g.project_id, g.trigger_id, count(y.id) AS runs,
           count(CASE WHEN y.status = 'succeeded' THEN 1 END) AS successes,
           count(CASE WHEN y.status IN ('failed', 'timed_out', 'lost') THEN 1 END) AS failures,
           count(CASE WHEN y.status = 'cancelled' AND y.cancel_reason IS NOT 'policy'
                      THEN 1 END) AS cancelled,
           count(CASE WHEN y.status = 'cancelled' AND y.cancel_reason = 'policy'
                      THEN 1 END) AS skipped,
           max(CASE WHEN y.trigger_type NOT IN ('manual', 'backfill')
                    THEN y.created_at_ms - y.scheduled_for_ms END) AS max_lag_ms
    FROM page g
    LEFT JOIN runs y ON y.id IN (
        SELECT x.id FROM runs x
        WHERE x.project_id = g.project_id AND x.trigger_id = g.trigger_id
          AND x.scheduled_for_ms IS NOT NULL
        ORDER BY x.scheduled_for_ms DESC, x.id DESC
        LIMIT :window)
    GROUP BY g.project_id, g.trigger_id
)
SELECT r.*,
       s.trigger_revision AS s_trigger_revision, s.next_fire_at_ms AS s_next_fire_at_ms,
       s.last_scheduled_at_ms AS s_last_scheduled_at_ms, s.state_version AS s_state_version,
       s.updated_at_ms AS s_updated_at_ms,
       s.paused_from_ms AS s_paused_from_ms, s.paused_until_ms AS s_paused_until_ms,
       (SELECT z.reason FROM trigger_pauses z
         WHERE z.project_id = h.project_id AND z.trigger_id = h.trigger_id
           AND z.paused_at_ms = s.paused_from_ms) AS pause_reason,
       (th.current_revision = r.task_revision) AS task_pin_current,
       (p.status = 'active') AS project_active,
       h.deleted_at_ms AS h_deleted_at_ms,
       f.runs AS w_runs, f.successes AS w_successes, f.failures AS w_failures,
       f.cancelled AS w_cancelled, f.skipped AS w_skipped, f.max_lag_ms AS w_max_lag_ms,
       l.id AS l_id, l.status AS l_status, l.trigger_type AS l_trigger_type,
       l.scheduled_for_ms AS l_scheduled_for_ms, l.created_at_ms AS l_created_at_ms,
       l.started_at_ms AS l_started_at_ms, l.finished_at_ms AS l_finished_at_ms
FROM page h
JOIN facts f ON f.project_id = h.project_id AND f.trigger_id = h.trigger_id
JOIN trigger_revisions r
  ON r.project_id = h.project_id AND r.trigger_id = h.trigger_id AND r.revision = h.current_revision
JOIN task_definitions th ON th.project_id = r.project_id AND th.task_id = r.task_id
JOIN projects p ON p.id = h.project_id
LEFT JOIN trigger_schedules s ON s.project_id = h.project_id AND s.trigger_id = h.trigger_id
LEFT JOIN runs l ON l.id = (
    SELECT x.id FROM runs x
    WHERE x.project_id = h.project_id AND x.trigger_id = h.trigger_id
      AND x.scheduled_for_ms IS NOT NULL
    ORDER BY x.scheduled_for_ms DESC, x.id DESC
    LIMIT 1)
ORDER BY h.project_id, h.trigger_id;
