-- name: notify_channel_get
-- One channel, removed or not (the secret itself is never selected here).
SELECT name, kind, config_json, secret IS NOT NULL AS secret_set, version, created_at_ms,
       updated_at_ms, removed_at_ms
FROM qinglong.notify_channels WHERE name = %(name)s;

-- name: notify_channel_list
-- The channels in use, by name.
SELECT name, kind, config_json, secret IS NOT NULL AS secret_set, version, created_at_ms,
       updated_at_ms, removed_at_ms
FROM qinglong.notify_channels WHERE removed_at_ms IS NULL ORDER BY name;

-- name: notify_channel_secret
-- What a send needs: the spec and the secret of a channel in use.
SELECT name, kind, config_json, secret FROM qinglong.notify_channels
WHERE name = %(name)s AND removed_at_ms IS NULL;

-- name: notify_channel_insert
-- A new channel.
INSERT INTO qinglong.notify_channels (name, kind, config_json, secret, version, created_at_ms,
                                      updated_at_ms, removed_at_ms)
VALUES (%(name)s, %(kind)s, %(config_json)s::jsonb, %(secret)s, 1, %(now_ms)s, %(now_ms)s,
        NULL);

-- name: notify_channel_update
-- Replace a channel's spec (and its secret unless kept); a removed channel comes back.
UPDATE qinglong.notify_channels
SET kind = %(kind)s, config_json = %(config_json)s::jsonb,
    secret = CASE WHEN %(keep_secret)s::boolean THEN secret ELSE %(secret)s::varchar END,
    version = version + 1,
    created_at_ms = CASE WHEN removed_at_ms IS NULL THEN created_at_ms
                         ELSE %(now_ms)s::bigint END,
    updated_at_ms = greatest(updated_at_ms, %(now_ms)s::bigint),
    removed_at_ms = NULL
WHERE name = %(name)s;

-- name: notify_channel_remove
-- Remove a channel: it keeps its name for the deliveries that name it, its secret is erased.
UPDATE qinglong.notify_channels
SET removed_at_ms = %(now_ms)s, secret = NULL, version = version + 1,
    updated_at_ms = greatest(updated_at_ms, %(now_ms)s::bigint)
WHERE name = %(name)s AND removed_at_ms IS NULL;

-- name: notify_rules_delete_channel
-- Every rule of a removed channel.
DELETE FROM qinglong.notify_rules WHERE channel = %(name)s;

-- name: notify_project_exists
-- Whether a project exists (rules name one).
SELECT count(*) AS found FROM qinglong.projects WHERE id = %(project_id)s;

-- name: notify_task_exists
-- Whether a task exists and is not deleted.
SELECT count(*) AS found FROM qinglong.task_definitions
WHERE project_id = %(project_id)s AND task_id = %(task_id)s AND deleted_at_ms IS NULL;

-- name: notify_rule_insert
-- One event of a rule (already there: nothing changes, its time stays); after_ms: the delay
-- of 'unplaceable', NULL for the other events.
INSERT INTO qinglong.notify_rules (channel, project_id, task_id, event, created_at_ms,
                                   after_ms)
VALUES (%(channel)s, %(project_id)s, %(task_id)s, %(event)s, %(now_ms)s, %(after_ms)s)
ON CONFLICT (channel, project_id, task_id, event) DO NOTHING;

-- name: notify_rule_delay
-- Change the delay of a rule's event sent after one (unplaceable, running_long, late_start).
UPDATE qinglong.notify_rules SET after_ms = %(after_ms)s
WHERE channel = %(channel)s AND project_id = %(project_id)s AND task_id = %(task_id)s
  AND event = %(event)s AND after_ms <> %(after_ms)s;

-- name: notify_rule_list
-- The rules of channels in use, optionally of one channel and one project.
SELECT n.channel, n.project_id, n.task_id, n.event, n.created_at_ms, n.after_ms
FROM qinglong.notify_rules n
JOIN qinglong.notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
WHERE (%(channel)s::varchar IS NULL OR n.channel = %(channel)s::varchar)
  AND (%(project_id)s::varchar IS NULL OR n.project_id = %(project_id)s::varchar)
ORDER BY n.channel, n.project_id, n.task_id, n.event;

-- name: notify_rule_delete
-- Remove events (all of them when events is NULL) of one rule.
DELETE FROM qinglong.notify_rules
WHERE channel = %(channel)s AND project_id = %(project_id)s AND task_id = %(task_id)s
  AND (%(events)s::jsonb IS NULL
       OR event IN (SELECT jsonb_array_elements_text(%(events)s::jsonb)));

-- name: notify_cursor_lock
-- The scan position of one source, locked; a replica scanning it now holds it (skipped).
SELECT frontier_ms, settled_ms FROM qinglong.notify_cursors WHERE source = %(source)s
FOR UPDATE SKIP LOCKED;

-- name: notify_cursor_exists
-- Whether a source has a scan position.
SELECT count(*) AS found FROM qinglong.notify_cursors WHERE source = %(source)s;

-- name: notify_cursor_start
-- Where scanning starts: just before the first rule was made (nothing earlier can match).
SELECT min(created_at_ms) AS first_rule_ms FROM qinglong.notify_rules;

-- name: notify_cursor_insert
-- A source's first scan position.
INSERT INTO qinglong.notify_cursors (source, frontier_ms, settled_ms, updated_at_ms)
VALUES (%(source)s, %(at_ms)s, %(at_ms)s, %(now_ms)s)
ON CONFLICT (source) DO NOTHING;

-- name: notify_cursor_update
-- Move a source's scan position.
UPDATE qinglong.notify_cursors SET frontier_ms = %(frontier_ms)s, settled_ms = %(settled_ms)s,
    updated_at_ms = %(now_ms)s
WHERE source = %(source)s;

-- name: notify_outcomes_page
-- The times of Run outcomes after a position (one page, oldest first).
SELECT created_at_ms AS at_ms FROM qinglong.run_events
WHERE type IN ('run.failed', 'run.timed_out', 'run.lost', 'run.cancelled')
  AND created_at_ms > %(after_ms)s AND created_at_ms <= %(upto_ms)s
ORDER BY created_at_ms LIMIT %(limit)s;

-- name: notify_outcomes_match
-- Run outcomes in (after, upto] that a rule wants and no outbox row holds yet, per channel.
-- include: run_outcome_columns
FROM qinglong.run_events e
JOIN qinglong.runs r ON r.id = e.run_id
JOIN qinglong.notify_rules n ON n.project_id = r.project_id AND n.task_id IN ('*', r.task_id)
     AND n.event = substr(e.type, 5) AND n.created_at_ms <= e.created_at_ms
JOIN qinglong.notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
WHERE e.type IN ('run.failed', 'run.timed_out', 'run.lost', 'run.cancelled')
  AND e.created_at_ms > %(after_ms)s AND e.created_at_ms <= %(upto_ms)s
  AND NOT EXISTS (SELECT 1 FROM qinglong.notify_outbox o
                  WHERE o.channel = c.name AND o.source_key = e.type || ':' || r.id)
ORDER BY e.created_at_ms, e.id, c.name;

-- name: notify_misfires_page
-- The times of misfire decisions after a position (one page, oldest first).
SELECT decided_at_ms AS at_ms FROM qinglong.trigger_schedule_misfires
WHERE policy IN ('skip', 'fire_once')
  AND decided_at_ms > %(after_ms)s AND decided_at_ms <= %(upto_ms)s
ORDER BY decided_at_ms LIMIT %(limit)s;

-- name: notify_misfires_match
-- Misfires in (after, upto] that a rule wants and no outbox row holds yet, per channel.
SELECT m.project_id, m.trigger_id, m.trigger_revision, m.due_at_ms, m.skipped_through_ms,
       m.next_fire_at_ms, m.policy, m.run_id, m.decided_at_ms, t.task_id,
       c.name AS channel, c.kind, c.config_json
FROM qinglong.trigger_schedule_misfires m
JOIN qinglong.triggers t ON t.project_id = m.project_id AND t.trigger_id = m.trigger_id
JOIN qinglong.notify_rules n ON n.project_id = m.project_id AND n.task_id IN ('*', t.task_id)
     AND n.event = 'misfired' AND n.created_at_ms <= m.decided_at_ms
JOIN qinglong.notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
WHERE m.policy IN ('skip', 'fire_once')
  AND m.decided_at_ms > %(after_ms)s AND m.decided_at_ms <= %(upto_ms)s
  AND NOT EXISTS (SELECT 1 FROM qinglong.notify_outbox o WHERE o.channel = c.name
                  AND o.source_key = 'trigger.misfired:' || m.project_id || '/' || m.trigger_id
                                     || '@' || m.trigger_revision || ':' || m.due_at_ms)
ORDER BY m.decided_at_ms, m.project_id, m.trigger_id, m.due_at_ms, c.name;

-- name: notify_recovery_watch
-- Watch for the recovery of the latest misfire in (after, upto] of each trigger a rule asks
-- 'recovered' of (a later misfire replaces an earlier one).
INSERT INTO qinglong.notify_recoveries (project_id, trigger_id, trigger_revision, due_at_ms,
                                        next_fire_at_ms, policy, misfired_at_ms, checked_at_ms)
SELECT DISTINCT ON (m.project_id, m.trigger_id)
       m.project_id, m.trigger_id, m.trigger_revision, m.due_at_ms, m.next_fire_at_ms,
       m.policy, m.decided_at_ms, %(now_ms)s
FROM qinglong.trigger_schedule_misfires m
JOIN qinglong.triggers t ON t.project_id = m.project_id AND t.trigger_id = m.trigger_id
WHERE m.policy IN ('skip', 'fire_once')
  AND m.decided_at_ms > %(after_ms)s AND m.decided_at_ms <= %(upto_ms)s
  AND EXISTS (SELECT 1 FROM qinglong.notify_rules n
              JOIN qinglong.notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
              WHERE n.project_id = m.project_id AND n.event = 'recovered'
                AND n.task_id IN ('*', t.task_id) AND n.created_at_ms <= m.decided_at_ms)
ORDER BY m.project_id, m.trigger_id, m.due_at_ms DESC
ON CONFLICT (project_id, trigger_id) DO UPDATE
SET trigger_revision = excluded.trigger_revision, due_at_ms = excluded.due_at_ms,
    next_fire_at_ms = excluded.next_fire_at_ms, policy = excluded.policy,
    misfired_at_ms = excluded.misfired_at_ms
WHERE excluded.due_at_ms > qinglong.notify_recoveries.due_at_ms;

-- name: notify_recovery_batch
-- The triggers waiting for a recovery, least recently checked first (one replica each).
SELECT project_id, trigger_id, trigger_revision, due_at_ms, next_fire_at_ms, policy,
       misfired_at_ms
FROM qinglong.notify_recoveries ORDER BY checked_at_ms, project_id, trigger_id
LIMIT %(limit)s FOR UPDATE SKIP LOCKED;

-- name: notify_recovery_probe
-- In one snapshot: the trigger's task (none: the trigger was deleted), a later misfire of the
-- trigger (if any), and its first scheduled Run at or after the occurrence the watched
-- misfire moved the schedule on to.
SELECT t.task_id, later.trigger_revision AS later_revision, later.due_at_ms AS later_due_at_ms,
       later.next_fire_at_ms AS later_next_fire_at_ms, later.policy AS later_policy,
       later.decided_at_ms AS later_decided_at_ms,
       ontime.id AS run_id, ontime.scheduled_for_ms, ontime.created_at_ms AS run_created_at_ms
FROM (SELECT 1) one
LEFT JOIN qinglong.triggers t ON t.project_id = %(project_id)s AND t.trigger_id = %(trigger_id)s
     AND t.deleted_at_ms IS NULL
LEFT JOIN (SELECT trigger_revision, due_at_ms, next_fire_at_ms, policy, decided_at_ms
           FROM qinglong.trigger_schedule_misfires
           WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s
             AND policy IN ('skip', 'fire_once') AND due_at_ms > %(due_at_ms)s
           ORDER BY due_at_ms DESC LIMIT 1) later ON TRUE
LEFT JOIN (SELECT id, scheduled_for_ms, created_at_ms FROM qinglong.runs
           WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s
             AND scheduled_for_ms >= %(next_fire_at_ms)s AND execution_origin = %(origin)s
           ORDER BY scheduled_for_ms LIMIT 1) ontime ON TRUE;

-- name: notify_recovery_move
-- Watch the later misfire instead.
UPDATE qinglong.notify_recoveries
SET trigger_revision = %(trigger_revision)s, due_at_ms = %(due_at_ms)s,
    next_fire_at_ms = %(next_fire_at_ms)s, policy = %(policy)s,
    misfired_at_ms = %(misfired_at_ms)s, checked_at_ms = %(now_ms)s
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s
  AND due_at_ms = %(old_due_at_ms)s;

-- name: notify_recovery_checked
-- Nothing yet: look again later.
UPDATE qinglong.notify_recoveries SET checked_at_ms = %(now_ms)s
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s
  AND due_at_ms = %(due_at_ms)s;

-- name: notify_recovery_delete
-- The watched misfire recovered (or nobody asks about it any more).
DELETE FROM qinglong.notify_recoveries
WHERE project_id = %(project_id)s AND trigger_id = %(trigger_id)s
  AND due_at_ms = %(due_at_ms)s;

-- name: notify_recovery_channels
-- The channels a rule asks 'recovered' of for a trigger's task, with no outbox row yet.
SELECT DISTINCT c.name AS channel, c.kind, c.config_json
FROM qinglong.notify_rules n
JOIN qinglong.notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
WHERE n.project_id = %(project_id)s AND n.event = 'recovered'
  AND n.task_id IN ('*', %(task_id)s::varchar) AND n.created_at_ms <= %(at_ms)s
  AND NOT EXISTS (SELECT 1 FROM qinglong.notify_outbox o
                  WHERE o.channel = c.name AND o.source_key = %(source_key)s)
ORDER BY c.name;

-- name: notify_unplaceable_page
-- One page of the walk over the queued Runs that require worker labels and have waited at
-- least the shortest delay of any 'unplaceable' rule (none: no page), oldest first after a
-- position (runs_labelled_queued_idx; at most %(limit)s Runs), each with every channel in
-- use whose rule covers it, whose delay it has waited out, and that has no outbox row for it
-- yet (none: one row with a NULL channel, so the page's end is known). Whether a live
-- worker could take it is judged by the caller (domain/placement.py).
WITH page AS (
    SELECT r.id, r.project_id, r.task_id, r.trigger_id, r.task_name, r.execution_origin,
           r.triggered_by, r.scheduled_for_ms, r.created_at_ms, r.attempts_spent,
           r.requires::text AS requires, r.queued_at_ms
    FROM qinglong.runs r
    WHERE r.status = 'queued' AND r.requires IS NOT NULL
      AND (r.queued_at_ms, r.id) > (%(after_ms)s::bigint, %(after_id)s::varchar)
      AND r.queued_at_ms <= %(now_ms)s::bigint - (
          SELECT min(n.after_ms) FROM qinglong.notify_rules n
          JOIN qinglong.notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
          WHERE n.event = 'unplaceable')
    ORDER BY r.queued_at_ms, r.id LIMIT %(limit)s
)
SELECT p.*, w.channel, w.kind, w.config_json, w.after_ms
FROM page p
LEFT JOIN (SELECT n.project_id, n.task_id, n.after_ms, c.name AS channel, c.kind,
                  c.config_json
           FROM qinglong.notify_rules n
           JOIN qinglong.notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
           WHERE n.event = 'unplaceable') w
     ON w.project_id = p.project_id AND w.task_id IN ('*', p.task_id)
    AND p.queued_at_ms <= %(now_ms)s::bigint - w.after_ms
    AND NOT EXISTS (SELECT 1 FROM qinglong.notify_outbox o
                    WHERE o.channel = w.channel AND o.source_key = 'run.unplaceable:' || p.id)
ORDER BY p.queued_at_ms, p.id, w.after_ms, w.channel;

-- name: notify_outbox_insert
-- A notification for one channel (already there: nothing changes).
INSERT INTO qinglong.notify_outbox (id, channel, source_key, event, project_id, task_id,
                                    trigger_id, run_id, payload, occurred_at_ms, status, attempts,
                                    max_attempts, next_attempt_at_ms, created_at_ms,
                                    updated_at_ms)
VALUES (%(id)s, %(channel)s, %(source_key)s, %(event)s, %(project_id)s, %(task_id)s,
        %(trigger_id)s, %(run_id)s, %(payload)s::jsonb, %(occurred_at_ms)s, 'pending', 0,
        %(max_attempts)s, %(now_ms)s, %(now_ms)s, %(now_ms)s)
ON CONFLICT (channel, source_key) DO NOTHING;

-- name: notify_outbox_due
-- The next delivery to attempt: pending and due, or sending with its lease run out; never of
-- a channel that failed earlier in this cycle; locked, and passed over while another replica
-- holds it.
SELECT o.id, o.channel, o.payload, c.kind, c.config_json, c.secret
FROM qinglong.notify_outbox o
JOIN qinglong.notify_channels c ON c.name = o.channel AND c.removed_at_ms IS NULL
WHERE o.status IN ('pending', 'sending') AND o.next_attempt_at_ms <= %(now_ms)s
  AND o.attempts < o.max_attempts
  AND o.channel NOT IN (SELECT jsonb_array_elements_text(%(skip)s::jsonb))
ORDER BY o.next_attempt_at_ms, o.id LIMIT 1
FOR UPDATE OF o SKIP LOCKED;

-- name: notify_outbox_lease
-- Lease one delivery for an attempt (the attempt counts from here).
UPDATE qinglong.notify_outbox
SET status = 'sending', attempts = attempts + 1, lease_owner = %(owner)s,
    lease_token = %(token)s, next_attempt_at_ms = %(lease_until_ms)s,
    updated_at_ms = %(now_ms)s
WHERE id = %(id)s AND status IN ('pending', 'sending')
RETURNING id, channel, source_key, event, project_id, task_id, trigger_id, run_id, status,
          attempts, max_attempts, next_attempt_at_ms, last_status, last_error, occurred_at_ms,
          created_at_ms, finished_at_ms;

-- name: notify_outbox_delivered
-- The receiver took it (only under the lease it was sent with).
UPDATE qinglong.notify_outbox
SET status = 'delivered', last_status = %(status_code)s, last_error = NULL, lease_owner = NULL,
    lease_token = NULL, finished_at_ms = %(now_ms)s, updated_at_ms = %(now_ms)s
WHERE id = %(id)s AND status = 'sending' AND lease_token = %(token)s
RETURNING id, channel, source_key, event, project_id, task_id, trigger_id, run_id, status,
          attempts, max_attempts, next_attempt_at_ms, last_status, last_error, occurred_at_ms,
          created_at_ms, finished_at_ms;

-- name: notify_outbox_failed
-- The attempt failed: try again after the backoff, or dead when it was the last attempt.
UPDATE qinglong.notify_outbox
SET status = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'pending' END,
    next_attempt_at_ms = %(now_ms)s::bigint + %(retry_in_ms)s::bigint,
    finished_at_ms = CASE WHEN attempts >= max_attempts THEN %(now_ms)s::bigint END,
    last_status = %(status_code)s, last_error = %(error)s, lease_owner = NULL,
    lease_token = NULL, updated_at_ms = %(now_ms)s
WHERE id = %(id)s AND status = 'sending' AND lease_token = %(token)s
RETURNING id, channel, source_key, event, project_id, task_id, trigger_id, run_id, status,
          attempts, max_attempts, next_attempt_at_ms, last_status, last_error, occurred_at_ms,
          created_at_ms, finished_at_ms;

-- name: notify_outbox_orphaned
-- Deliveries of removed channels are not tried again (rows another replica holds are left
-- for a later pass).
UPDATE qinglong.notify_outbox
SET status = 'dead', last_error = 'the channel was removed', lease_owner = NULL,
    lease_token = NULL, finished_at_ms = %(now_ms)s, updated_at_ms = %(now_ms)s
WHERE id IN (SELECT o.id FROM qinglong.notify_outbox o
             JOIN qinglong.notify_channels c ON c.name = o.channel
             WHERE o.status IN ('pending', 'sending') AND c.removed_at_ms IS NOT NULL
             LIMIT 500 FOR UPDATE OF o SKIP LOCKED);

-- name: notify_outbox_exhausted
-- A last attempt whose sender vanished (its lease ran out): not tried again.
UPDATE qinglong.notify_outbox
SET status = 'dead', lease_owner = NULL, lease_token = NULL, finished_at_ms = %(now_ms)s,
    updated_at_ms = %(now_ms)s,
    last_error = 'the sender of the last attempt stopped before it reported'
WHERE id IN (SELECT id FROM qinglong.notify_outbox
             WHERE status IN ('pending', 'sending') AND next_attempt_at_ms <= %(now_ms)s
               AND attempts >= max_attempts
             LIMIT 500 FOR UPDATE SKIP LOCKED);

-- name: notify_outbox_purge
-- Forget deliveries that ended before the retention (a bounded batch).
DELETE FROM qinglong.notify_outbox WHERE id IN (
    SELECT id FROM qinglong.notify_outbox
    WHERE finished_at_ms IS NOT NULL AND finished_at_ms < %(before_ms)s
    ORDER BY finished_at_ms LIMIT %(limit)s FOR UPDATE SKIP LOCKED);

-- name: notify_outbox_next_due
-- When the next delivery notify_outbox_due could lease falls due (channels cooling down
-- after a failure left out).
SELECT min(o.next_attempt_at_ms) AS next_ms FROM qinglong.notify_outbox o
JOIN qinglong.notify_channels c ON c.name = o.channel AND c.removed_at_ms IS NULL
WHERE o.status IN ('pending', 'sending') AND o.attempts < o.max_attempts
  AND o.channel NOT IN (SELECT jsonb_array_elements_text(%(skip)s::jsonb));

-- name: notify_probe
-- Whether a dispatcher cycle could have work, in one auto-committed statement on the database
-- clock (an idle cycle sends only this), each column the condition under which that step
-- writes what notifications depend on:
-- enqueue_start: a source without a cursor while a rule exists (notify_cursor_start);
-- outcomes, misfires: source rows after the frontier, or in the settled position's next
--   window, (settled, least(frontier, now - settle)] (notify_*_page);
-- recoveries: a waiting trigger that was deleted, misfired again or fired on time since
--   (notify_recovery_probe; one that did none of these would only be marked looked at);
-- next_attempt_at_ms: when the next delivery notify_outbox_due could lease falls due;
-- unplaceable: a queued Run that requires labels has waited the shortest delay of an
--   'unplaceable' rule (notify_unplaceable_page would return a page: it may have been
--   reported already, or a live worker may take it; the dispatcher asks on its own pace);
-- progress: like outcomes, for the starts and successes (notify_progress_page: only from
--   the first rule that asks for 'started' or 'succeeded'; none, never);
-- running_long, late_start: like unplaceable, for those walks (notify_running_long_page,
--   notify_late_start_page);
-- tidy, purge (only when asked for): what notify_outbox_orphaned, notify_outbox_exhausted and
--   notify_outbox_purge would change.
WITH clock AS MATERIALIZED (
    SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms,
           (SELECT min(created_at_ms) FROM qinglong.notify_rules
            WHERE event IN ('started', 'succeeded')) AS progress_ms,
           (SELECT min(n.after_ms) FROM qinglong.notify_rules n
            JOIN qinglong.notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
            WHERE n.event = 'running_long') AS running_long_ms,
           (SELECT min(n.after_ms) FROM qinglong.notify_rules n
            JOIN qinglong.notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
            WHERE n.event = 'late_start') AS late_start_ms
)
SELECT k.now_ms,
       (oc.source IS NULL OR mc.source IS NULL OR pc.source IS NULL)
           AND EXISTS (SELECT 1 FROM qinglong.notify_rules) AS enqueue_start,
       CASE WHEN k.progress_ms IS NULL THEN false ELSE
           EXISTS (SELECT 1 FROM qinglong.run_events e
                   WHERE e.type IN ('attempt.running', 'run.succeeded')
                     AND e.created_at_ms > greatest(pc.frontier_ms, k.progress_ms - 1))
           OR EXISTS (SELECT 1 FROM qinglong.run_events e
                      WHERE e.type IN ('attempt.running', 'run.succeeded')
                        AND e.created_at_ms > greatest(pc.settled_ms, k.progress_ms - 1)
                        AND e.created_at_ms <= least(pc.frontier_ms,
                                                     k.now_ms - %(settle_ms)s::bigint))
       END AS progress,
       CASE WHEN k.running_long_ms IS NULL THEN false ELSE EXISTS (
           SELECT 1 FROM qinglong.runs r
           WHERE r.status IN ('dispatching', 'running') AND r.status = 'running'
             AND r.started_at_ms <= k.now_ms - k.running_long_ms) END AS running_long,
       CASE WHEN k.late_start_ms IS NULL THEN false ELSE EXISTS (
           SELECT 1 FROM qinglong.runs r
           WHERE r.status = 'queued' AND r.started_at_ms IS NULL
             AND coalesce(r.scheduled_for_ms, r.created_at_ms) <= k.now_ms - k.late_start_ms)
       END AS late_start,
       EXISTS (SELECT 1 FROM qinglong.run_events e
               WHERE e.type IN ('run.failed', 'run.timed_out', 'run.lost', 'run.cancelled')
                 AND e.created_at_ms > oc.frontier_ms)
       OR EXISTS (SELECT 1 FROM qinglong.run_events e
                  WHERE e.type IN ('run.failed', 'run.timed_out', 'run.lost', 'run.cancelled')
                    AND e.created_at_ms > oc.settled_ms
                    AND e.created_at_ms <= least(oc.frontier_ms,
                                                 k.now_ms - %(settle_ms)s::bigint)) AS outcomes,
       EXISTS (SELECT 1 FROM qinglong.trigger_schedule_misfires m
               WHERE m.policy IN ('skip', 'fire_once') AND m.decided_at_ms > mc.frontier_ms)
       OR EXISTS (SELECT 1 FROM qinglong.trigger_schedule_misfires m
                  WHERE m.policy IN ('skip', 'fire_once') AND m.decided_at_ms > mc.settled_ms
                    AND m.decided_at_ms <= least(mc.frontier_ms,
                                                 k.now_ms - %(settle_ms)s::bigint)) AS misfires,
       EXISTS (SELECT 1 FROM qinglong.notify_recoveries w
               WHERE NOT EXISTS (SELECT 1 FROM qinglong.triggers t
                                 WHERE t.project_id = w.project_id
                                   AND t.trigger_id = w.trigger_id AND t.deleted_at_ms IS NULL)
                  OR EXISTS (SELECT 1 FROM qinglong.trigger_schedule_misfires m
                             WHERE m.project_id = w.project_id AND m.trigger_id = w.trigger_id
                               AND m.policy IN ('skip', 'fire_once')
                               AND m.due_at_ms > w.due_at_ms)
                  OR EXISTS (SELECT 1 FROM qinglong.runs r
                             WHERE r.project_id = w.project_id AND r.trigger_id = w.trigger_id
                               AND r.scheduled_for_ms >= w.next_fire_at_ms
                               AND r.execution_origin = %(origin)s::varchar)) AS recoveries,
       (SELECT min(o.next_attempt_at_ms) FROM qinglong.notify_outbox o
        JOIN qinglong.notify_channels c ON c.name = o.channel AND c.removed_at_ms IS NULL
        WHERE o.status IN ('pending', 'sending') AND o.attempts < o.max_attempts
          AND o.channel NOT IN (SELECT jsonb_array_elements_text(%(skip)s::jsonb)))
           AS next_attempt_at_ms,
       EXISTS (SELECT 1 FROM qinglong.runs r
               WHERE r.status = 'queued' AND r.requires IS NOT NULL
                 AND r.queued_at_ms <= k.now_ms - (
                     SELECT min(n.after_ms) FROM qinglong.notify_rules n
                     JOIN qinglong.notify_channels c
                       ON c.name = n.channel AND c.removed_at_ms IS NULL
                     WHERE n.event = 'unplaceable')) AS unplaceable,
       CASE WHEN %(tidy)s::boolean THEN
           EXISTS (SELECT 1 FROM qinglong.notify_outbox o
                   JOIN qinglong.notify_channels c ON c.name = o.channel
                   WHERE o.status IN ('pending', 'sending') AND c.removed_at_ms IS NOT NULL)
           OR EXISTS (SELECT 1 FROM qinglong.notify_outbox o
                      WHERE o.status IN ('pending', 'sending')
                        AND o.next_attempt_at_ms <= k.now_ms
                        AND o.attempts >= o.max_attempts)
       ELSE false END AS tidy,
       CASE WHEN %(retention_ms)s::bigint IS NOT NULL THEN
           EXISTS (SELECT 1 FROM qinglong.notify_outbox o
                   WHERE o.finished_at_ms IS NOT NULL
                     AND o.finished_at_ms < k.now_ms - %(retention_ms)s::bigint)
       ELSE false END AS purge
FROM clock k
LEFT JOIN qinglong.notify_cursors oc ON oc.source = 'run_outcomes'
LEFT JOIN qinglong.notify_cursors mc ON mc.source = 'misfires'
LEFT JOIN qinglong.notify_cursors pc ON pc.source = 'run_progress';

-- name: notify_delivery_list
-- Deliveries, newest first, optionally of one status and one channel.
SELECT id, channel, source_key, event, project_id, task_id, trigger_id, run_id, status,
       attempts, max_attempts, next_attempt_at_ms, last_status, last_error, occurred_at_ms,
       created_at_ms, finished_at_ms
FROM qinglong.notify_outbox
WHERE (%(status)s::varchar IS NULL OR status = %(status)s::varchar)
  AND (%(channel)s::varchar IS NULL OR channel = %(channel)s::varchar)
ORDER BY created_at_ms DESC, id DESC LIMIT %(limit)s;

-- name: notify_delivery_find
-- The deliveries whose id starts with a prefix (at most two: one is a match, two ambiguous).
SELECT id, channel, source_key, event, project_id, task_id, trigger_id, run_id, status,
       attempts, max_attempts, next_attempt_at_ms, last_status, last_error, occurred_at_ms,
       created_at_ms, finished_at_ms
FROM qinglong.notify_outbox
WHERE substr(id, 1, length(%(prefix)s::varchar)) = %(prefix)s::varchar ORDER BY id LIMIT 2;

-- name: notify_delivery_retry
-- Try a dead delivery again, from its first attempt.
UPDATE qinglong.notify_outbox
SET status = 'pending', attempts = 0, next_attempt_at_ms = %(now_ms)s, finished_at_ms = NULL,
    updated_at_ms = %(now_ms)s
WHERE id = %(id)s AND status = 'dead';
