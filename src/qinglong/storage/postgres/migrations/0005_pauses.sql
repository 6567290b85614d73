-- Timed pauses of triggers: the history in trigger_pauses (who, why, until when, resumed by
-- whom), the latest pause on the schedule row where the claim and the commit read it, and
-- the occurrences a pause held back recorded beside misfires with the policy 'paused'.
ALTER TABLE qinglong.trigger_schedules
    ADD COLUMN paused_from_ms bigint CHECK (paused_from_ms >= 0),
    ADD COLUMN paused_until_ms bigint,
    ADD CONSTRAINT trigger_schedules_pause_shape CHECK (
        (paused_from_ms IS NOT NULL OR paused_until_ms IS NULL)
        AND (paused_until_ms IS NULL OR paused_until_ms >= paused_from_ms));

-- The wake-up hint looks for the next timed pause to end.
CREATE INDEX trigger_schedules_pause_end_idx ON qinglong.trigger_schedules (paused_until_ms)
    WHERE paused_until_ms IS NOT NULL;

CREATE TABLE qinglong.trigger_pauses (
    project_id    varchar(128)  NOT NULL,
    trigger_id    varchar(128)  NOT NULL,
    paused_at_ms  bigint        NOT NULL CHECK (paused_at_ms >= 0),
    until_ms      bigint,
    resumed_at_ms bigint,
    reason        varchar(1024),
    paused_by     varchar(255)  NOT NULL,
    resumed_by    varchar(255),
    PRIMARY KEY (project_id, trigger_id, paused_at_ms),
    FOREIGN KEY (project_id, trigger_id) REFERENCES qinglong.triggers (project_id, trigger_id),
    CHECK (until_ms IS NULL OR until_ms > paused_at_ms),
    CHECK (resumed_at_ms IS NULL OR resumed_at_ms >= paused_at_ms),
    CHECK ((resumed_at_ms IS NULL) = (resumed_by IS NULL))
);

ALTER TABLE qinglong.trigger_schedule_misfires
    DROP CONSTRAINT trigger_schedule_misfires_policy_check,
    ADD CONSTRAINT trigger_schedule_misfires_policy_check
        CHECK (policy IN ('skip', 'fire_once', 'paused'));

REVOKE ALL ON qinglong.trigger_pauses FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON qinglong.trigger_pauses TO ql_admin;
GRANT SELECT ON qinglong.trigger_pauses TO ql_runtime;

DO $$
BEGIN
    UPDATE qinglong.schema_capabilities
       SET contract_version = 5, migration_id = '0005_pauses',
           capabilities = '["definitions", "run_core", "cluster_scheduler_admission", "role_grants", "attempt_leases", "workers", "pauses"]',
           updated_at_ms = (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint
     WHERE contract_name = 'qinglong-control' AND contract_version = 4
       AND migration_id = '0004_workers';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'capability row is not at version 4' USING ERRCODE = 'check_violation';
    END IF;
END $$;
