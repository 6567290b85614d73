-- name: notify_channel_get
-- One channel, removed or not (the secret itself is never selected here).
SELECT name, kind, config_json, secret IS NOT NULL AS secret_set, version, created_at_ms,
       updated_at_ms, removed_at_ms
FROM notify_channels WHERE name = :name;

-- name: notify_channel_list
-- The channels in use, by name.
SELECT name, kind, config_json, secret IS NOT NULL AS secret_set, version, created_at_ms,
       updated_at_ms, removed_at_ms
FROM notify_channels WHERE removed_at_ms IS NULL ORDER BY name;

-- name: notify_channel_secret
-- What a send needs: the spec and the secret of a channel in use.
SELECT name, kind, config_json, secret FROM notify_channels
WHERE name = :name AND removed_at_ms IS NULL;

-- name: notify_channel_insert
-- A new channel.
INSERT INTO notify_channels (name, kind, config_json, secret, version, created_at_ms,
                             updated_at_ms, removed_at_ms)
VALUES (:name, :kind, :config_json, :secret, 1, :now_ms, :now_ms, NULL);

-- name: notify_channel_update
-- Replace a channel's spec (and its secret unless kept); a removed channel comes back.
UPDATE notify_channels
SET kind = :kind, config_json = :config_json,
    secret = CASE WHEN :keep_secret THEN secret ELSE :secret END,
    version = version + 1,
    created_at_ms = CASE WHEN removed_at_ms IS NULL THEN created_at_ms ELSE :now_ms END,
    updated_at_ms = max(updated_at_ms, :now_ms),
    removed_at_ms = NULL
WHERE name = :name;

-- name: notify_channel_remove
-- Remove a channel: it keeps its name for the deliveries that name it, its secret is erased.
UPDATE notify_channels
SET removed_at_ms = :now_ms, secret = NULL, version = version + 1,
    updated_at_ms = max(updated_at_ms, :now_ms)
WHERE name = :name AND removed_at_ms IS NULL;

-- name: notify_rules_delete_channel
-- Every rule of a removed channel.
DELETE FROM notify_rules WHERE channel = :name;

-- name: notify_project_exists
-- Whether a project exists (rules name one).
SELECT count(*) AS found FROM projects WHERE id = :project_id;

-- name: notify_task_exists
-- Whether a task exists and is not deleted.
SELECT count(*) AS found FROM task_definitions
WHERE project_id = :project_id AND task_id = :task_id AND deleted_at_ms IS NULL;

-- name: notify_rule_insert
-- One event of a rule (already there: nothing changes, its time stays); after_ms: the delay
-- of 'unplaceable', NULL for the other events.
INSERT INTO notify_rules (channel, project_id, task_id, event, created_at_ms, after_ms)
VALUES (:channel, :project_id, :task_id, :event, :now_ms, :after_ms)
ON CONFLICT (channel, project_id, task_id, event) DO NOTHING;

-- name: notify_rule_delay
-- Change the delay of a rule's event sent after one (unplaceable, running_long, late_start).
UPDATE notify_rules SET after_ms = :after_ms
WHERE channel = :channel AND project_id = :project_id AND task_id = :task_id
  AND event = :event AND after_ms <> :after_ms;

-- name: notify_rule_list
-- The rules of channels in use, optionally of one channel and one project.
SELECT n.channel, n.project_id, n.task_id, n.event, n.created_at_ms, n.after_ms
FROM notify_rules n JOIN notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
WHERE (:channel IS NULL OR n.channel = :channel)
  AND (:project_id IS NULL OR n.project_id = :project_id)
ORDER BY n.channel, n.project_id, n.task_id, n.event;

-- name: notify_rule_delete
-- Remove events (all of them when :events is NULL) of one rule.
DELETE FROM notify_rules
WHERE channel = :channel AND project_id = :project_id AND task_id = :task_id
  AND (:events IS NULL OR event IN (SELECT value FROM json_each(:events)));

-- name: notify_cursor_lock
-- The scan position of one source (the write transaction holds the database).
SELECT frontier_ms, settled_ms FROM notify_cursors WHERE source = :source;

-- name: notify_cursor_exists
-- Whether a source has a scan position.
SELECT count(*) AS found FROM notify_cursors WHERE source = :source;

-- name: notify_cursor_start
-- Where scanning starts: just before the first rule was made (nothing earlier can match).
SELECT min(created_at_ms) AS first_rule_ms FROM notify_rules;

-- name: notify_cursor_insert
-- A source's first scan position.
INSERT INTO notify_cursors (source, frontier_ms, settled_ms, updated_at_ms)
VALUES (:source, :at_ms, :at_ms, :now_ms)
ON CONFLICT (source) DO NOTHING;

-- name: notify_cursor_update
-- Move a source's scan position.
UPDATE notify_cursors SET frontier_ms = :frontier_ms, settled_ms = :settled_ms,
    updated_at_ms = :now_ms
WHERE source = :source;

-- name: notify_outcomes_page
-- The times of Run outcomes after a position (one page, oldest first).
SELECT created_at_ms AS at_ms FROM run_events
WHERE type IN ('run.failed', 'run.timed_out', 'run.lost', 'run.cancelled')
  AND created_at_ms > :after_ms AND created_at_ms <= :upto_ms
ORDER BY created_at_ms LIMIT :limit;

-- name: notify_outcomes_match
-- Run outcomes in (after, upto] that a rule wants and no outbox row holds yet, per channel.
-- include: run_outcome_columns
FROM run_events e
JOIN runs r ON r.id = e.run_id
JOIN notify_rules n ON n.project_id = r.project_id AND n.task_id IN ('*', r.task_id)
     AND n.event = substr(e.type, 5) AND n.created_at_ms <= e.created_at_ms
JOIN notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
WHERE e.type IN ('run.failed', 'run.timed_out', 'run.lost', 'run.cancelled')
  AND e.created_at_ms > :after_ms AND e.created_at_ms <= :upto_ms
  AND NOT EXISTS (SELECT 1 FROM notify_outbox o
                  WHERE o.channel = c.name AND o.source_key = e.type || ':' || r.id)
ORDER BY e.created_at_ms, e.id, c.name;

-- name: notify_misfires_page
-- The times of misfire decisions after a position (one page, oldest first).
SELECT decided_at_ms AS at_ms FROM trigger_schedule_misfires
WHERE policy IN ('skip', 'fire_once') AND decided_at_ms > :after_ms AND decided_at_ms <= :upto_ms
ORDER BY decided_at_ms LIMIT :limit;

-- name: notify_misfires_match
-- Misfires in (after, upto] that a rule wants and no outbox row holds yet, per channel.
SELECT m.project_id, m.trigger_id, m.trigger_revision, m.due_at_ms, m.skipped_through_ms,
       m.next_fire_at_ms, m.policy, m.run_id, m.decided_at_ms, t.task_id,
       c.name AS channel, c.kind, c.config_json
FROM trigger_schedule_misfires m
JOIN triggers t ON t.project_id = m.project_id AND t.trigger_id = m.trigger_id
JOIN notify_rules n ON n.project_id = m.project_id AND n.task_id IN ('*', t.task_id)
     AND n.event = 'misfired' AND n.created_at_ms <= m.decided_at_ms
JOIN notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
WHERE m.policy IN ('skip', 'fire_once')
  AND m.decided_at_ms > :after_ms AND m.decided_at_ms <= :upto_ms
  AND NOT EXISTS (SELECT 1 FROM notify_outbox o WHERE o.channel = c.name
                  AND o.source_key = 'trigger.misfired:' || m.project_id || '/' || m.trigger_id
                                     || '@' || m.trigger_revision || ':' || m.due_at_ms)
ORDER BY m.decided_at_ms, m.project_id, m.trigger_id, m.due_at_ms, c.name;

-- name: notify_recovery_watch
-- Watch for the recovery of the latest misfire in (after, upto] of each trigger a rule asks
-- 'recovered' of (a later misfire replaces an earlier one).
INSERT INTO notify_recoveries (project_id, trigger_id, trigger_revision, due_at_ms,
                               next_fire_at_ms, policy, misfired_at_ms, checked_at_ms)
SELECT m.project_id, m.trigger_id, m.trigger_revision, max(m.due_at_ms), m.next_fire_at_ms,
       m.policy, m.decided_at_ms, :now_ms
FROM trigger_schedule_misfires m
JOIN triggers t ON t.project_id = m.project_id AND t.trigger_id = m.trigger_id
WHERE m.policy IN ('skip', 'fire_once')
  AND m.decided_at_ms > :after_ms AND m.decided_at_ms <= :upto_ms
  AND EXISTS (SELECT 1 FROM notify_rules n
              JOIN notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
              WHERE n.project_id = m.project_id AND n.event = 'recovered'
                AND n.task_id IN ('*', t.task_id) AND n.created_at_ms <= m.decided_at_ms)
GROUP BY m.project_id, m.trigger_id
ON CONFLICT (project_id, trigger_id) DO UPDATE
SET trigger_revision = excluded.trigger_revision, due_at_ms = excluded.due_at_ms,
    next_fire_at_ms = excluded.next_fire_at_ms, policy = excluded.policy,
    misfired_at_ms = excluded.misfired_at_ms
WHERE excluded.due_at_ms > notify_recoveries.due_at_ms;

-- name: notify_recovery_batch
-- The triggers waiting for a recovery, least recently checked first.
SELECT project_id, trigger_id, trigger_revision, due_at_ms, next_fire_at_ms, policy,
       misfired_at_ms
FROM notify_recoveries ORDER BY checked_at_ms, project_id, trigger_id LIMIT :limit;

-- name: notify_recovery_probe
-- In one snapshot: the trigger's task (none: the trigger was deleted), a later misfire of the
-- trigger (if any), and its first scheduled Run at or after the occurrence the watched
-- misfire moved the schedule on to.
SELECT t.task_id, later.trigger_revision AS later_revision, later.due_at_ms AS later_due_at_ms,
       later.next_fire_at_ms AS later_next_fire_at_ms, later.policy AS later_policy,
       later.decided_at_ms AS later_decided_at_ms,
       ontime.id AS run_id, ontime.scheduled_for_ms, ontime.created_at_ms AS run_created_at_ms
FROM (SELECT 1) one
LEFT JOIN triggers t ON t.project_id = :project_id AND t.trigger_id = :trigger_id
     AND t.deleted_at_ms IS NULL
LEFT JOIN (SELECT trigger_revision, due_at_ms, next_fire_at_ms, policy, decided_at_ms
           FROM trigger_schedule_misfires
           WHERE project_id = :project_id AND trigger_id = :trigger_id
             AND policy IN ('skip', 'fire_once') AND due_at_ms > :due_at_ms
           ORDER BY due_at_ms DESC LIMIT 1) later ON 1
LEFT JOIN (SELECT id, scheduled_for_ms, created_at_ms FROM runs
           WHERE project_id = :project_id AND trigger_id = :trigger_id
             AND scheduled_for_ms >= :next_fire_at_ms AND execution_origin = :origin
           ORDER BY scheduled_for_ms LIMIT 1) ontime ON 1;

-- name: notify_recovery_move
-- Watch the later misfire instead.
UPDATE notify_recoveries
SET trigger_revision = :trigger_revision, due_at_ms = :due_at_ms,
    next_fire_at_ms = :next_fire_at_ms, policy = :policy, misfired_at_ms = :misfired_at_ms,
    checked_at_ms = :now_ms
WHERE project_id = :project_id AND trigger_id = :trigger_id AND due_at_ms = :old_due_at_ms;

-- name: notify_recovery_checked
-- Nothing yet: look again later.
UPDATE notify_recoveries SET checked_at_ms = :now_ms
WHERE project_id = :project_id AND trigger_id = :trigger_id AND due_at_ms = :due_at_ms;

-- name: notify_recovery_delete
-- The watched misfire recovered (or nobody asks about it any more).
DELETE FROM notify_recoveries
WHERE project_id = :project_id AND trigger_id = :trigger_id AND due_at_ms = :due_at_ms;

-- name: notify_recovery_channels
-- The channels a rule asks 'recovered' of for a trigger's task, with no outbox row yet.
SELECT DISTINCT c.name AS channel, c.kind, c.config_json
FROM notify_rules n JOIN notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
WHERE n.project_id = :project_id AND n.event = 'recovered' AND n.task_id IN ('*', :task_id)
  AND n.created_at_ms <= :at_ms
  AND NOT EXISTS (SELECT 1 FROM notify_outbox o
                  WHERE o.channel = c.name AND o.source_key = :source_key)
ORDER BY c.name;

-- name: notify_unplaceable_page
-- One page of the walk over the queued Runs that require worker labels and have waited the
-- shortest delay of an 'unplaceable' rule, each with the channels that still owe it a
-- notification (as on PostgreSQL; runs_labelled_queued_idx).
WITH page AS (
    SELECT r.id, r.project_id, r.task_id, r.trigger_id, r.task_name, r.execution_origin,
           r.triggered_by, r.scheduled_for_ms, r.created_at_ms, r.attempts_spent,
           r.requires, r.queued_at_ms
    FROM runs r
    WHERE r.status = 'queued' AND r.requires IS NOT NULL
      AND (r.queued_at_ms, r.id) > (:after_ms, :after_id)
      AND r.queued_at_ms <= :now_ms - (
          SELECT min(n.after_ms) FROM notify_rules n
          JOIN notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
          WHERE n.event = 'unplaceable')
    ORDER BY r.queued_at_ms, r.id LIMIT :limit
)
SELECT p.*, w.channel, w.kind, w.config_json, w.after_ms
FROM page p
LEFT JOIN (SELECT n.project_id, n.task_id, n.after_ms, c.name AS channel, c.kind,
                  c.config_json
           FROM notify_rules n
           JOIN notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
           WHERE n.event = 'unplaceable') w
     ON w.project_id = p.project_id AND w.task_id IN ('*', p.task_id)
    AND p.queued_at_ms <= :now_ms - w.after_ms
    AND NOT EXISTS (SELECT 1 FROM notify_outbox o
                    WHERE o.channel = w.channel AND o.source_key = 'run.unplaceable:' || p.id)
ORDER BY p.queued_at_ms, p.id, w.after_ms, w.channel;

-- name: notify_outbox_insert
-- A notification for one channel (already there: nothing changes).
INSERT INTO notify_outbox (id, channel, source_key, event, project_id, task_id, trigger_id,
                           run_id, payload, occurred_at_ms, status, attempts, max_attempts,
                           next_attempt_at_ms, created_at_ms, updated_at_ms)
VALUES (:id, :channel, :source_key, :event, :project_id, :task_id, :trigger_id, :run_id,
        :payload, :occurred_at_ms, 'pending', 0, :max_attempts, :now_ms, :now_ms, :now_ms)
ON CONFLICT (channel, source_key) DO NOTHING;

-- name: notify_outbox_due
-- The next delivery to attempt: pending and due, or sending with its lease run out; never of
-- a channel that failed earlier in this cycle.
SELECT o.id, o.channel, o.payload, c.kind, c.config_json, c.secret
FROM notify_outbox o
JOIN notify_channels c ON c.name = o.channel AND c.removed_at_ms IS NULL
WHERE o.status IN ('pending', 'sending') AND o.next_attempt_at_ms <= :now_ms
  AND o.attempts < o.max_attempts
  AND o.channel NOT IN (SELECT value FROM json_each(:skip))
ORDER BY o.next_attempt_at_ms, o.id LIMIT 1;

-- name: notify_outbox_lease
-- Lease one delivery for an attempt (the attempt counts from here).
UPDATE notify_outbox
SET status = 'sending', attempts = attempts + 1, lease_owner = :owner, lease_token = :token,
    next_attempt_at_ms = :lease_until_ms, updated_at_ms = :now_ms
WHERE id = :id AND status IN ('pending', 'sending')
RETURNING id, channel, source_key, event, project_id, task_id, trigger_id, run_id, status,
          attempts, max_attempts, next_attempt_at_ms, last_status, last_error, occurred_at_ms,
          created_at_ms, finished_at_ms;

-- name: notify_outbox_delivered
-- The receiver took it (only under the lease it was sent with).
UPDATE notify_outbox
SET status = 'delivered', last_status = :status_code, last_error = NULL, lease_owner = NULL,
    lease_token = NULL, finished_at_ms = :now_ms, updated_at_ms = :now_ms
WHERE id = :id AND status = 'sending' AND lease_token = :token
RETURNING id, channel, source_key, event, project_id, task_id, trigger_id, run_id, status,
          attempts, max_attempts, next_attempt_at_ms, last_status, last_error, occurred_at_ms,
          created_at_ms, finished_at_ms;

-- name: notify_outbox_failed
-- The attempt failed: try again after the backoff, or dead when it was the last attempt.
UPDATE notify_outbox
SET status = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'pending' END,
    next_attempt_at_ms = :now_ms + :retry_in_ms,
    finished_at_ms = CASE WHEN attempts >= max_attempts THEN :now_ms END,
    last_status = :status_code, last_error = :error, lease_owner = NULL, lease_token = NULL,
    updated_at_ms = :now_ms
WHERE id = :id AND status = 'sending' AND lease_token = :token
RETURNING id, channel, source_key, event, project_id, task_id, trigger_id, run_id, status,
          attempts, max_attempts, next_attempt_at_ms, last_status, last_error, occurred_at_ms,
          created_at_ms, finished_at_ms;

-- name: notify_outbox_orphaned
-- Deliveries of removed channels are not tried again.
UPDATE notify_outbox
SET status = 'dead', last_error = 'the channel was removed', lease_owner = NULL,
    lease_token = NULL, finished_at_ms = :now_ms, updated_at_ms = :now_ms
WHERE status IN ('pending', 'sending')
  AND channel IN (SELECT name FROM notify_channels WHERE removed_at_ms IS NOT NULL);

-- name: notify_outbox_exhausted
-- A last attempt whose sender vanished (its lease ran out): not tried again.
UPDATE notify_outbox
SET status = 'dead', lease_owner = NULL, lease_token = NULL, finished_at_ms = :now_ms,
    updated_at_ms = :now_ms,
    last_error = 'the sender of the last attempt stopped before it reported'
WHERE status IN ('pending', 'sending') AND next_attempt_at_ms <= :now_ms
  AND attempts >= max_attempts;

-- name: notify_outbox_purge
-- Forget deliveries that ended before the retention (a bounded batch).
DELETE FROM notify_outbox WHERE id IN (
    SELECT id FROM notify_outbox WHERE finished_at_ms IS NOT NULL AND finished_at_ms < :before_ms
    ORDER BY finished_at_ms LIMIT :limit);

-- name: notify_outbox_next_due
-- When the next delivery notify_outbox_due could lease falls due (channels cooling down
-- after a failure left out).
SELECT min(o.next_attempt_at_ms) AS next_ms FROM notify_outbox o
JOIN notify_channels c ON c.name = o.channel AND c.removed_at_ms IS NULL
WHERE o.status IN ('pending', 'sending') AND o.attempts < o.max_attempts
  AND o.channel NOT IN (SELECT value FROM json_each(:skip));

-- name: notify_probe
-- Whether a dispatcher cycle could have work, in one statement (as on PostgreSQL, with the
-- node clock given as :now_ms), each column the condition under which that step writes what
-- notifications depend on:
-- enqueue_start: a source without a cursor while a rule exists (notify_cursor_start);
-- outcomes, misfires: source rows after the frontier, or in the settled position's next
--   window, (settled, min(frontier, now - settle)] (notify_*_page);
-- recoveries: a waiting trigger that was deleted, misfired again or fired on time since
--   (notify_recovery_probe; one that did none of these would only be marked looked at);
-- next_attempt_at_ms: when the next delivery notify_outbox_due could lease falls due;
-- unplaceable: a queued Run that requires labels has waited the shortest delay of an
--   'unplaceable' rule (notify_unplaceable_page would return a page);
-- progress, running_long, late_start: as on PostgreSQL;
-- tidy, purge (only when asked for): what notify_outbox_orphaned, notify_outbox_exhausted and
--   notify_outbox_purge would change.
SELECT :now_ms AS now_ms,
       (oc.source IS NULL OR mc.source IS NULL OR pc.source IS NULL)
           AND EXISTS (SELECT 1 FROM notify_rules) AS enqueue_start,
       CASE WHEN k.progress_ms IS NULL THEN 0 ELSE
           EXISTS (SELECT 1 FROM run_events e
                   WHERE e.type IN ('attempt.running', 'run.succeeded')
                     AND e.created_at_ms > max(coalesce(pc.frontier_ms, -1), k.progress_ms - 1))
           OR EXISTS (SELECT 1 FROM run_events e
                      WHERE e.type IN ('attempt.running', 'run.succeeded')
                        AND e.created_at_ms > max(pc.settled_ms, k.progress_ms - 1)
                        AND e.created_at_ms <= min(pc.frontier_ms, :now_ms - :settle_ms))
       END AS progress,
       CASE WHEN k.running_long_ms IS NULL THEN 0 ELSE EXISTS (
           SELECT 1 FROM runs r
           WHERE r.status IN ('dispatching', 'running') AND r.status = 'running'
             AND r.started_at_ms <= :now_ms - k.running_long_ms) END AS running_long,
       CASE WHEN k.late_start_ms IS NULL THEN 0 ELSE EXISTS (
           SELECT 1 FROM runs r
           WHERE r.status = 'queued' AND r.started_at_ms IS NULL
             AND coalesce(r.scheduled_for_ms, r.created_at_ms) <= :now_ms - k.late_start_ms)
       END AS late_start,
       EXISTS (SELECT 1 FROM run_events e
               WHERE e.type IN ('run.failed', 'run.timed_out', 'run.lost', 'run.cancelled')
                 AND e.created_at_ms > oc.frontier_ms)
       OR EXISTS (SELECT 1 FROM run_events e
                  WHERE e.type IN ('run.failed', 'run.timed_out', 'run.lost', 'run.cancelled')
                    AND e.created_at_ms > oc.settled_ms
                    AND e.created_at_ms <= min(oc.frontier_ms, :now_ms - :settle_ms))
           AS outcomes,
       EXISTS (SELECT 1 FROM trigger_schedule_misfires m
               WHERE m.policy IN ('skip', 'fire_once') AND m.decided_at_ms > mc.frontier_ms)
       OR EXISTS (SELECT 1 FROM trigger_schedule_misfires m
                  WHERE m.policy IN ('skip', 'fire_once') AND m.decided_at_ms > mc.settled_ms
                    AND m.decided_at_ms <= min(mc.frontier_ms, :now_ms - :settle_ms))
           AS misfires,
       EXISTS (SELECT 1 FROM notify_recoveries w
               WHERE NOT EXISTS (SELECT 1 FROM triggers t
                                 WHERE t.project_id = w.project_id
                                   AND t.trigger_id = w.trigger_id AND t.deleted_at_ms IS NULL)
                  OR EXISTS (SELECT 1 FROM trigger_schedule_misfires m
                             WHERE m.project_id = w.project_id AND m.trigger_id = w.trigger_id
                               AND m.policy IN ('skip', 'fire_once')
                               AND m.due_at_ms > w.due_at_ms)
                  OR EXISTS (SELECT 1 FROM runs r
                             WHERE r.project_id = w.project_id AND r.trigger_id = w.trigger_id
                               AND r.scheduled_for_ms >= w.next_fire_at_ms
                               AND r.execution_origin = :origin)) AS recoveries,
       (SELECT min(o.next_attempt_at_ms) FROM notify_outbox o
        JOIN notify_channels c ON c.name = o.channel AND c.removed_at_ms IS NULL
        WHERE o.status IN ('pending', 'sending') AND o.attempts < o.max_attempts
          AND o.channel NOT IN (SELECT value FROM json_each(:skip))) AS next_attempt_at_ms,
       EXISTS (SELECT 1 FROM runs r
               WHERE r.status = 'queued' AND r.requires IS NOT NULL
                 AND r.queued_at_ms <= :now_ms - (
                     SELECT min(n.after_ms) FROM notify_rules n
                     JOIN notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
                     WHERE n.event = 'unplaceable')) AS unplaceable,
       CASE WHEN :tidy THEN
           EXISTS (SELECT 1 FROM notify_outbox o
                   JOIN notify_channels c ON c.name = o.channel
                   WHERE o.status IN ('pending', 'sending') AND c.removed_at_ms IS NOT NULL)
           OR EXISTS (SELECT 1 FROM notify_outbox o
                      WHERE o.status IN ('pending', 'sending') AND o.next_attempt_at_ms <= :now_ms
                        AND o.attempts >= o.max_attempts)
       ELSE 0 END AS tidy,
       CASE WHEN :retention_ms IS NOT NULL THEN
           EXISTS (SELECT 1 FROM notify_outbox o
                   WHERE o.finished_at_ms IS NOT NULL
                     AND o.finished_at_ms < :now_ms - :retention_ms)
       ELSE 0 END AS purge
FROM (SELECT (SELECT min(created_at_ms) FROM notify_rules
              WHERE event IN ('started', 'succeeded')) AS progress_ms,
             (SELECT min(n.after_ms) FROM notify_rules n
              JOIN notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
              WHERE n.event = 'running_long') AS running_long_ms,
             (SELECT min(n.after_ms) FROM notify_rules n
              JOIN notify_channels c ON c.name = n.channel AND c.removed_at_ms IS NULL
              WHERE n.event = 'late_start') AS late_start_ms) k
LEFT JOIN notify_cursors oc ON oc.source = 'run_outcomes'
LEFT JOIN notify_cursors mc ON mc.source = 'misfires'
LEFT JOIN notify_cursors pc ON pc.source = 'run_progress';

-- name: notify_outbox_release
-- At `ql serve` start: its file lock proves no attempt is in flight any more.
UPDATE notify_outbox
SET status = 'pending', lease_owner = NULL, lease_token = NULL, next_attempt_at_ms = :now_ms,
    updated_at_ms = :now_ms
WHERE status = 'sending';

-- name: notify_delivery_list
-- Deliveries, newest first, optionally of one status and one channel.
SELECT id, channel, source_key, event, project_id, task_id, trigger_id, run_id, status,
       attempts, max_attempts, next_attempt_at_ms, last_status, last_error, occurred_at_ms,
       created_at_ms, finished_at_ms
FROM notify_outbox
WHERE (:status IS NULL OR status = :status) AND (:channel IS NULL OR channel = :channel)
ORDER BY created_at_ms DESC, id DESC LIMIT :limit;

-- name: notify_delivery_find
-- The deliveries whose id starts with a prefix (at most two: one is a match, two ambiguous).
SELECT id, channel, source_key, event, project_id, task_id, trigger_id, run_id, status,
       attempts, max_attempts, next_attempt_at_ms, last_status, last_error, occurred_at_ms,
       created_at_ms, finished_at_ms
FROM notify_outbox WHERE substr(id, 1, length(:prefix)) = :prefix ORDER BY id LIMIT 2;

-- name: notify_delivery_retry
-- Try a dead delivery again, from its first attempt.
UPDATE notify_outbox
SET status = 'pending', attempts = 0, next_attempt_at_ms = :now_ms, finished_at_ms = NULL,
    updated_at_ms = :now_ms
WHERE id = :id AND status = 'dead';
