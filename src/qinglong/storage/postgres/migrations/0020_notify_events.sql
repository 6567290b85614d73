-- More notification events and channels (issue 22, item 5; docs/controls/notifications.md).
--
-- Rules may ask for 'started' and 'succeeded' (opt-in: most Runs start and succeed) and for
-- two deadlines sent after the rule's own delay, like 'unplaceable': 'running_long' (a Run
-- still running that long after its attempt started) and 'late_start' (a Run still queued,
-- never started, that long after its scheduled time). after_ms is on the rows of those three
-- events only.
--
-- A channel may be of the kind 'service' (DingTalk, Feishu, WeCom, ServerChan, PushPlus,
-- ntfy, Gotify, Slack, Discord: the request is built by qinglong for that service).
--
-- The dispatchers scan the starts ('attempt.running') and successes ('run.succeeded') of
-- Runs by their time, as they scan the outcomes that end a Run badly (0006's
-- run_events_outcome_idx): one more index entry per attempt start and per success. The
-- deadlines are walked, not scanned: the running Runs along runs_active_task_idx (only
-- Runs being executed: few), the queued ones along runs_queued_idx; no index for them.
ALTER TABLE qinglong.notify_rules DROP CONSTRAINT notify_rules_event_check;
ALTER TABLE qinglong.notify_rules ADD CONSTRAINT notify_rules_event_check
    CHECK (event IN ('failed', 'timed_out', 'lost', 'cancelled', 'misfired', 'recovered',
                     'unplaceable', 'started', 'succeeded', 'running_long', 'late_start'));
ALTER TABLE qinglong.notify_rules DROP CONSTRAINT notify_rules_after_check;
ALTER TABLE qinglong.notify_rules ADD CONSTRAINT notify_rules_after_check
    CHECK ((event IN ('unplaceable', 'running_long', 'late_start')) = (after_ms IS NOT NULL));

ALTER TABLE qinglong.notify_channels DROP CONSTRAINT notify_channels_kind_check;
ALTER TABLE qinglong.notify_channels ADD CONSTRAINT notify_channels_kind_check
    CHECK (kind IN ('webhook', 'email', 'template', 'service'));

-- The scan position of the starts and successes.
ALTER TABLE qinglong.notify_cursors DROP CONSTRAINT notify_cursors_source_check;
ALTER TABLE qinglong.notify_cursors ADD CONSTRAINT notify_cursors_source_check
    CHECK (source IN ('run_outcomes', 'misfires', 'run_progress'));

CREATE INDEX run_events_progress_idx ON qinglong.run_events (created_at_ms)
    WHERE type IN ('attempt.running', 'run.succeeded');
