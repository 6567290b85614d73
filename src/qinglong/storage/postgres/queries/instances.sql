-- name: instance_start
-- Register (or re-register) a process serving the database, at database time.
INSERT INTO qinglong.instances
    (instance_id, role, host, pid, started_at_ms, seen_at_ms, stopped_at_ms)
SELECT %(instance_id)s, %(role)s, %(host)s, %(pid)s, o.now_ms, o.now_ms, NULL
FROM (SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms) o
ON CONFLICT (instance_id) DO UPDATE
SET role = excluded.role, host = excluded.host, pid = excluded.pid,
    started_at_ms = excluded.started_at_ms, seen_at_ms = excluded.seen_at_ms, stopped_at_ms = NULL;

-- name: instance_beat
-- A heartbeat, at database time.
UPDATE qinglong.instances
SET seen_at_ms = greatest(seen_at_ms, (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint)
WHERE instance_id = %(instance_id)s;

-- name: instance_stop
-- A clean stop, at database time (read once: two reads of the clock could differ by a
-- millisecond and leave the stop after the last sighting).
UPDATE qinglong.instances AS i
SET stopped_at_ms = n.now_ms,
    seen_at_ms = greatest(i.seen_at_ms, n.now_ms)
FROM (SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms) AS n
WHERE i.instance_id = %(instance_id)s;

-- name: instance_list
-- Every process that ever served the database, most recently seen first.
SELECT instance_id, role, host, pid, started_at_ms, seen_at_ms, stopped_at_ms
FROM qinglong.instances ORDER BY seen_at_ms DESC, instance_id;
