-- Timed pauses of triggers: the history in trigger_pauses, the latest pause on the schedule
-- row, and the occurrences a pause held back recorded beside misfires with policy 'paused'
-- (SQLite cannot alter a CHECK, so the misfire table is rebuilt with its rows).
ALTER TABLE trigger_schedules ADD COLUMN paused_from_ms INTEGER
    CHECK (paused_from_ms IS NULL OR paused_from_ms >= 0);
ALTER TABLE trigger_schedules ADD COLUMN paused_until_ms INTEGER
    CHECK (paused_until_ms IS NULL OR (paused_from_ms IS NOT NULL
                                       AND paused_until_ms >= paused_from_ms));

CREATE INDEX trigger_schedules_pause_end_idx ON trigger_schedules (paused_until_ms)
    WHERE paused_until_ms IS NOT NULL;

CREATE TABLE trigger_pauses (
    project_id    TEXT    NOT NULL,
    trigger_id    TEXT    NOT NULL,
    paused_at_ms  INTEGER NOT NULL CHECK (paused_at_ms >= 0),
    until_ms      INTEGER,
    resumed_at_ms INTEGER,
    reason        TEXT    CHECK (reason IS NULL OR length(reason) <= 1024),
    paused_by     TEXT    NOT NULL,
    resumed_by    TEXT,
    PRIMARY KEY (project_id, trigger_id, paused_at_ms),
    FOREIGN KEY (project_id, trigger_id) REFERENCES triggers (project_id, trigger_id),
    CHECK (until_ms IS NULL OR until_ms > paused_at_ms),
    CHECK (resumed_at_ms IS NULL OR resumed_at_ms >= paused_at_ms),
    CHECK ((resumed_at_ms IS NULL) = (resumed_by IS NULL))
) STRICT;

CREATE TABLE trigger_schedule_misfires_new (
    project_id       TEXT    NOT NULL,
    trigger_id       TEXT    NOT NULL,
    trigger_revision INTEGER NOT NULL,
    due_at_ms        INTEGER NOT NULL,
    skipped_through_ms INTEGER NOT NULL CHECK (skipped_through_ms >= due_at_ms),
    next_fire_at_ms  INTEGER NOT NULL CHECK (next_fire_at_ms > skipped_through_ms),
    policy           TEXT    NOT NULL CHECK (policy IN ('skip', 'fire_once', 'paused')),
    run_id           TEXT,
    decided_at_ms    INTEGER NOT NULL,
    PRIMARY KEY (project_id, trigger_id, trigger_revision, due_at_ms)
) STRICT;
INSERT INTO trigger_schedule_misfires_new SELECT * FROM trigger_schedule_misfires;
DROP TABLE trigger_schedule_misfires;
ALTER TABLE trigger_schedule_misfires_new RENAME TO trigger_schedule_misfires;
