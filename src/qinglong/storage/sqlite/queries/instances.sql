-- name: instance_holder
-- Who holds an id a registration was refused for, and how long it has been silent (read in
-- the write transaction of instance_start, at :now_ms).
SELECT h.role, h.host, h.pid, h.seen_at_ms, o.now_ms
FROM (SELECT :now_ms AS now_ms) o
LEFT JOIN instances h ON h.instance_id = :instance_id;

-- name: instance_start
-- Register a process under an id, one live holder per id. The id is taken when it is new,
-- when its holder stopped cleanly, when its holder has been silent for stale_ms (it
-- crashed), when the row is this process's own registration (resume: the same host, pid and
-- start), or, for a caller holding a lock that proves no other process of its role runs
-- (`ql serve`), when its holder has the same role. No row returned: refused.
INSERT INTO instances (instance_id, role, host, pid, started_at_ms, seen_at_ms, stopped_at_ms,
                       labels)
VALUES (:instance_id, :role, :host, :pid, coalesce(:resume_started_at_ms, :now_ms), :now_ms,
        NULL, :labels)
ON CONFLICT (instance_id) DO UPDATE
SET role = excluded.role, host = excluded.host, pid = excluded.pid,
    started_at_ms = excluded.started_at_ms, seen_at_ms = excluded.seen_at_ms,
    stopped_at_ms = NULL, labels = excluded.labels
WHERE instances.stopped_at_ms IS NOT NULL
   OR instances.seen_at_ms <= excluded.seen_at_ms - :stale_ms
   OR (instances.host = excluded.host AND instances.pid = excluded.pid
       AND instances.started_at_ms = :resume_started_at_ms)
   OR (:locked AND instances.role = excluded.role)
RETURNING started_at_ms;

-- name: instance_beat
-- A heartbeat of this process's own registration only (none once another process has taken
-- the id over).
UPDATE instances SET seen_at_ms = max(seen_at_ms, :now_ms)
WHERE instance_id = :instance_id AND host = :host AND pid = :pid
  AND started_at_ms = :started_at_ms AND stopped_at_ms IS NULL;

-- name: instance_stop
-- A clean stop of this process's own registration: a process never marks another's stopped.
UPDATE instances SET seen_at_ms = max(seen_at_ms, :now_ms), stopped_at_ms = :now_ms
WHERE instance_id = :instance_id AND host = :host AND pid = :pid
  AND started_at_ms = :started_at_ms AND stopped_at_ms IS NULL;

-- name: instance_list
-- Every process that ever served the database, most recently seen first.
SELECT instance_id, role, host, pid, started_at_ms, seen_at_ms, stopped_at_ms, labels
FROM instances ORDER BY seen_at_ms DESC, instance_id;
