-- Bounded jitter (docs/controls/triggers.md): the jittered instant at which the schedule row's
-- cursor becomes due. NULL means at the cursor itself (a trigger without jitter). A row is
-- claimed once both have come; the cursor keeps the nominal occurrence (its identity).
ALTER TABLE qinglong.trigger_schedules
    ADD COLUMN next_due_at_ms bigint CHECK (next_due_at_ms >= 0),
    ADD CONSTRAINT trigger_schedules_due_shape CHECK (
        next_due_at_ms IS NULL
        OR (next_fire_at_ms IS NOT NULL AND next_due_at_ms >= next_fire_at_ms));

-- The wake-up hint looks for the next jittered instant.
CREATE INDEX trigger_schedules_jittered_due_idx ON qinglong.trigger_schedules (next_due_at_ms)
    WHERE next_due_at_ms IS NOT NULL;
