-- name: instance_start
-- Register a process under an id at database time, one live holder per id. The id is taken
-- when it is new, when its holder stopped cleanly, when its holder has been silent for
-- stale_ms (it crashed), when the row is this process's own registration (resume: the same
-- host, pid and start), or, for a caller holding a lock that proves no other process of its
-- role runs (`ql serve`), when its holder has the same role. No row returned: refused.
INSERT INTO qinglong.instances AS i
    (instance_id, role, host, pid, started_at_ms, seen_at_ms, stopped_at_ms, labels)
SELECT %(instance_id)s, %(role)s, %(host)s, %(pid)s,
       coalesce(%(resume_started_at_ms)s::bigint, o.now_ms), o.now_ms, NULL,
       %(labels)s::jsonb
FROM (SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms) o
ON CONFLICT (instance_id) DO UPDATE
SET role = excluded.role, host = excluded.host, pid = excluded.pid,
    started_at_ms = excluded.started_at_ms, seen_at_ms = excluded.seen_at_ms,
    stopped_at_ms = NULL, labels = excluded.labels
WHERE i.stopped_at_ms IS NOT NULL
   OR i.seen_at_ms <= excluded.seen_at_ms - %(stale_ms)s::bigint
   OR (i.host = excluded.host AND i.pid = excluded.pid
       AND i.started_at_ms = %(resume_started_at_ms)s::bigint)
   OR (%(locked)s::boolean AND i.role = excluded.role)
RETURNING i.started_at_ms;

-- name: instance_holder
-- Who holds an id a registration was refused for, and how long it has been silent (database
-- time).
SELECT h.role, h.host, h.pid, h.seen_at_ms, o.now_ms
FROM (SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms) o
LEFT JOIN qinglong.instances h ON h.instance_id = %(instance_id)s;

-- name: instance_beat
-- A heartbeat, at database time, of this process's own registration only (none once another
-- process has taken the id over).
UPDATE qinglong.instances
SET seen_at_ms = greatest(seen_at_ms, (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint)
WHERE instance_id = %(instance_id)s AND host = %(host)s AND pid = %(pid)s
  AND started_at_ms = %(started_at_ms)s AND stopped_at_ms IS NULL;

-- name: instance_stop
-- A clean stop of this process's own registration, at database time (read once: two reads
-- of the clock could differ by a millisecond and leave the stop after the last sighting). A
-- process never marks another's registration stopped.
UPDATE qinglong.instances AS i
SET stopped_at_ms = n.now_ms,
    seen_at_ms = greatest(i.seen_at_ms, n.now_ms)
FROM (SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms) AS n
WHERE i.instance_id = %(instance_id)s AND i.host = %(host)s AND i.pid = %(pid)s
  AND i.started_at_ms = %(started_at_ms)s AND i.stopped_at_ms IS NULL;

-- name: instance_list
-- Every process that ever served the database, most recently seen first.
SELECT instance_id, role, host, pid, started_at_ms, seen_at_ms, stopped_at_ms, labels
FROM qinglong.instances ORDER BY seen_at_ms DESC, instance_id;
