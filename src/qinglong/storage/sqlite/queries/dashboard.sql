-- The dashboard's summary of triggers (storage/dashboard.py): one page of current triggers
-- and, for each, what its latest Runs say. One statement per page, whatever the number of
-- triggers: each trigger's Runs are read along runs_trigger_idx (project_id, trigger_id,
-- scheduled_for_ms), newest occurrence first, at most :window of them (a correlated
-- subquery per trigger of the page, its counts as one JSON array: SQLite has no LATERAL;
-- MATERIALIZED runs it once per trigger, not once per column read from it).

-- name: trigger_summary_page
-- A page of current triggers (of one project, of the projects in a JSON array, or all; with one
-- label, when it is given; only, or all but, the [project, trigger] pairs of a JSON array, when it
-- is given: a user's pins first) after the key (after_project, after_trigger), in (project,
-- trigger) order, with their schedule rows (as trigger_list has them); from each trigger's latest
-- :window Runs by occurrence: the outcome counts (a lost Run is a failure, a Run its overlap
-- policy ended is skipped: service/stats.py) and the largest admission lag of a Run the scheduler
-- admitted (not run now, not backfilled); and its latest Run (l_).
WITH page AS (
    SELECT h.project_id, h.trigger_id, h.current_revision, h.deleted_at_ms
    FROM triggers h
    WHERE (:project_id IS NULL OR h.project_id = :project_id)
      AND (:projects IS NULL OR h.project_id IN (SELECT value FROM json_each(:projects)))
      AND (:label IS NULL OR EXISTS (
             SELECT 1 FROM trigger_labels b
              WHERE b.project_id = h.project_id AND b.trigger_id = h.trigger_id
                AND b.label = :label))
      AND (:only IS NULL OR (h.project_id, h.trigger_id) IN (
             SELECT json_extract(k.value, '$[0]'), json_extract(k.value, '$[1]')
               FROM json_each(:only) k))
      AND (:skip IS NULL OR (h.project_id, h.trigger_id) NOT IN (
             SELECT json_extract(k.value, '$[0]'), json_extract(k.value, '$[1]')
               FROM json_each(:skip) k))
      AND h.deleted_at_ms IS NULL
      AND (:after_project IS NULL
           OR (h.project_id, h.trigger_id) > (:after_project, :after_trigger))
    ORDER BY h.project_id, h.trigger_id
    LIMIT :limit
),
facts AS MATERIALIZED (
    SELECT g.project_id, g.trigger_id, g.current_revision, g.deleted_at_ms, (
        SELECT json_array(
            count(*),
            count(CASE WHEN y.status = 'succeeded' THEN 1 END),
            count(CASE WHEN y.status IN ('failed', 'timed_out', 'lost') THEN 1 END),
            count(CASE WHEN y.status = 'cancelled' AND y.cancel_reason IS NOT 'policy'
                       THEN 1 END),
            count(CASE WHEN y.status = 'cancelled' AND y.cancel_reason = 'policy' THEN 1 END),
            max(CASE WHEN y.trigger_type NOT IN ('manual', 'backfill')
                     THEN y.created_at_ms - y.scheduled_for_ms END))
        FROM (SELECT x.status, x.cancel_reason, x.trigger_type, x.created_at_ms,
                     x.scheduled_for_ms
              FROM runs x
              WHERE x.project_id = g.project_id AND x.trigger_id = g.trigger_id
                AND x.scheduled_for_ms IS NOT NULL
              ORDER BY x.scheduled_for_ms DESC, x.id DESC
              LIMIT :window) y) AS counts
    FROM page g
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
       json_extract(h.counts, '$[0]') AS w_runs, json_extract(h.counts, '$[1]') AS w_successes,
       json_extract(h.counts, '$[2]') AS w_failures,
       json_extract(h.counts, '$[3]') AS w_cancelled,
       json_extract(h.counts, '$[4]') AS w_skipped,
       json_extract(h.counts, '$[5]') AS w_max_lag_ms,
       l.id AS l_id, l.status AS l_status, l.trigger_type AS l_trigger_type,
       l.scheduled_for_ms AS l_scheduled_for_ms, l.created_at_ms AS l_created_at_ms,
       l.started_at_ms AS l_started_at_ms, l.finished_at_ms AS l_finished_at_ms
FROM facts h
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
