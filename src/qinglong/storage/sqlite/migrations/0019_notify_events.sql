-- More notification events and channels (issue 22, item 5; PostgreSQL's migration 0020 has
-- the reasoning): rules may ask for 'started', 'succeeded', 'running_long' and 'late_start'
-- (the last two, like 'unplaceable', with the rule's delay in after_ms), and a channel may be
-- of the kind 'service'. SQLite cannot change a CHECK constraint, so notify_channels,
-- notify_rules and notify_cursors are rebuilt: the new rules table refers to the new channels table, both old
-- ones are dropped (the rules first: nothing refers to them), and the renames leave the
-- reference pointing at notify_channels.
CREATE TABLE notify_channels_new (
    name          TEXT    NOT NULL PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 64),
    kind          TEXT    NOT NULL CHECK (kind IN ('webhook', 'email', 'template', 'service')),
    config_json   TEXT    NOT NULL CHECK (json_valid(config_json) AND length(config_json) <= 65536),
    secret        TEXT    CHECK (secret IS NULL OR length(secret) BETWEEN 1 AND 4096),
    version       INTEGER NOT NULL CHECK (version >= 1),
    created_at_ms INTEGER NOT NULL CHECK (created_at_ms >= 0),
    updated_at_ms INTEGER NOT NULL CHECK (updated_at_ms >= created_at_ms),
    removed_at_ms INTEGER,
    CHECK (removed_at_ms IS NULL OR secret IS NULL)
) STRICT;
INSERT INTO notify_channels_new (name, kind, config_json, secret, version, created_at_ms,
                                 updated_at_ms, removed_at_ms)
SELECT name, kind, config_json, secret, version, created_at_ms, updated_at_ms, removed_at_ms
FROM notify_channels;

CREATE TABLE notify_rules_new (
    channel       TEXT    NOT NULL REFERENCES notify_channels_new (name),
    project_id    TEXT    NOT NULL REFERENCES projects (id),
    task_id       TEXT    NOT NULL CHECK (length(task_id) BETWEEN 1 AND 128),
    event         TEXT    NOT NULL CHECK (event IN ('failed', 'timed_out', 'lost', 'cancelled',
                                                    'misfired', 'recovered', 'unplaceable',
                                                    'started', 'succeeded', 'running_long',
                                                    'late_start')),
    created_at_ms INTEGER NOT NULL CHECK (created_at_ms >= 0),
    after_ms      INTEGER CHECK (after_ms IS NULL OR after_ms >= 0),
    PRIMARY KEY (channel, project_id, task_id, event),
    CHECK ((event IN ('unplaceable', 'running_long', 'late_start')) = (after_ms IS NOT NULL))
) STRICT;
INSERT INTO notify_rules_new (channel, project_id, task_id, event, created_at_ms, after_ms)
SELECT channel, project_id, task_id, event, created_at_ms, after_ms FROM notify_rules;

DROP TABLE notify_rules;
DROP TABLE notify_channels;
ALTER TABLE notify_channels_new RENAME TO notify_channels;
ALTER TABLE notify_rules_new RENAME TO notify_rules;
CREATE INDEX notify_rules_match_idx ON notify_rules (project_id, event, task_id);

-- The scan position of the starts and successes (notify_cursors rebuilt for its CHECK).
CREATE TABLE notify_cursors_new (
    source        TEXT    NOT NULL PRIMARY KEY
                  CHECK (source IN ('run_outcomes', 'misfires', 'run_progress')),
    frontier_ms   INTEGER NOT NULL,
    settled_ms    INTEGER NOT NULL CHECK (settled_ms <= frontier_ms),
    updated_at_ms INTEGER NOT NULL
) STRICT;
INSERT INTO notify_cursors_new (source, frontier_ms, settled_ms, updated_at_ms)
SELECT source, frontier_ms, settled_ms, updated_at_ms FROM notify_cursors;
DROP TABLE notify_cursors;
ALTER TABLE notify_cursors_new RENAME TO notify_cursors;

-- The starts and successes of Runs, by their time: what the dispatcher scans for 'started'
-- and 'succeeded'.
CREATE INDEX run_events_progress_idx ON run_events (created_at_ms)
    WHERE type IN ('attempt.running', 'run.succeeded');
