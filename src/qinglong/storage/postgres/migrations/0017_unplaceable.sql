-- A notification for a Run no live worker can take (issue 21, docs/controls/placement.md and
-- docs/controls/notifications.md). A rule may ask for the event 'unplaceable'; its row says
-- how long such a Run waits before it is reported (after_ms, only on that event's row: the
-- other events of a rule are sent when they happen).
--
-- The dispatcher looks at the queued Runs that require worker labels oldest first, a bounded
-- page per pass, along runs_labelled_queued_idx: it holds only queued Runs that require
-- labels (a Run that requires none can always be taken), so Runs that require nothing never
-- lengthen the walk. Like runs_queued_idx, only the admission writes it: a step out of
-- queued writes nothing to it.
--
-- ql_admin and ql_web may now change a rule's delay (UPDATE on notify_rules).
ALTER TABLE qinglong.notify_rules DROP CONSTRAINT notify_rules_event_check;
ALTER TABLE qinglong.notify_rules ADD CONSTRAINT notify_rules_event_check
    CHECK (event IN ('failed', 'timed_out', 'lost', 'cancelled', 'misfired', 'recovered',
                     'unplaceable'));
ALTER TABLE qinglong.notify_rules ADD COLUMN after_ms bigint
    CHECK (after_ms IS NULL OR after_ms >= 0);
ALTER TABLE qinglong.notify_rules ADD CONSTRAINT notify_rules_after_check
    CHECK ((event = 'unplaceable') = (after_ms IS NOT NULL));

CREATE INDEX runs_labelled_queued_idx ON qinglong.runs (queued_at_ms, id)
    WHERE status = 'queued' AND requires IS NOT NULL;

GRANT UPDATE ON qinglong.notify_rules TO ql_admin, ql_web;
