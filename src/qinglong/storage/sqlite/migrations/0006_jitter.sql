-- Bounded jitter (docs/controls/triggers.md): the jittered instant at which the schedule row's
-- cursor becomes due. NULL means at the cursor itself (a trigger without jitter). A row is
-- listed as due once both have come; the cursor keeps the nominal occurrence (its identity).
ALTER TABLE trigger_schedules ADD COLUMN next_due_at_ms INTEGER
    CHECK (next_due_at_ms IS NULL OR (next_fire_at_ms IS NOT NULL
                                      AND next_due_at_ms >= next_fire_at_ms));

CREATE INDEX trigger_schedules_jittered_due_idx ON trigger_schedules (next_due_at_ms)
    WHERE next_due_at_ms IS NOT NULL;
