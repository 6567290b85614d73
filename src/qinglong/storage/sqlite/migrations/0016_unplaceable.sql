-- A notification for a Run no live worker can take (issue 21; PostgreSQL's migration 0017
-- has the reasoning). A rule may ask for the event 'unplaceable', and its row says how long
-- such a Run waits before it is reported (after_ms, only on that event's row). SQLite cannot
-- change a CHECK constraint, so notify_rules is rebuilt (nothing refers to it).
CREATE TABLE notify_rules_new (
    channel       TEXT    NOT NULL REFERENCES notify_channels (name),
    project_id    TEXT    NOT NULL REFERENCES projects (id),
    task_id       TEXT    NOT NULL CHECK (length(task_id) BETWEEN 1 AND 128),
    event         TEXT    NOT NULL CHECK (event IN ('failed', 'timed_out', 'lost', 'cancelled',
                                                    'misfired', 'recovered', 'unplaceable')),
    created_at_ms INTEGER NOT NULL CHECK (created_at_ms >= 0),
    after_ms      INTEGER CHECK (after_ms IS NULL OR after_ms >= 0),
    PRIMARY KEY (channel, project_id, task_id, event),
    CHECK ((event = 'unplaceable') = (after_ms IS NOT NULL))
) STRICT;
INSERT INTO notify_rules_new (channel, project_id, task_id, event, created_at_ms)
SELECT channel, project_id, task_id, event, created_at_ms FROM notify_rules;
DROP TABLE notify_rules;
ALTER TABLE notify_rules_new RENAME TO notify_rules;
CREATE INDEX notify_rules_match_idx ON notify_rules (project_id, event, task_id);

-- The queued Runs that require worker labels, oldest first: what the dispatcher walks.
CREATE INDEX runs_labelled_queued_idx ON runs (queued_at_ms, id)
    WHERE status = 'queued' AND requires IS NOT NULL;
