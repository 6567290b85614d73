-- name: instance_start
-- Register (or re-register) a process serving the database.
INSERT INTO instances (instance_id, role, host, pid, started_at_ms, seen_at_ms, stopped_at_ms)
VALUES (:instance_id, :role, :host, :pid, :now_ms, :now_ms, NULL)
ON CONFLICT (instance_id) DO UPDATE
SET role = excluded.role, host = excluded.host, pid = excluded.pid,
    started_at_ms = excluded.started_at_ms, seen_at_ms = excluded.seen_at_ms, stopped_at_ms = NULL;

-- name: instance_beat
-- A heartbeat.
UPDATE instances SET seen_at_ms = max(seen_at_ms, :now_ms) WHERE instance_id = :instance_id;

-- name: instance_stop
-- A clean stop.
UPDATE instances SET seen_at_ms = max(seen_at_ms, :now_ms), stopped_at_ms = :now_ms
WHERE instance_id = :instance_id;

-- name: instance_list
-- Every process that ever served the database, most recently seen first.
SELECT instance_id, role, host, pid, started_at_ms, seen_at_ms, stopped_at_ms
FROM instances ORDER BY seen_at_ms DESC, instance_id;
