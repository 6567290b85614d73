-- Retention (docs/retention.md): the events of Runs that ended before the horizon are deleted
-- a slice of Runs at a time, sweeping the runs table in rowid order (no index on the end time
-- is needed; one `ql serve` holds the file). Runs, Attempts and misfires are kept.

-- name: retention_events_slice
-- The next slice of Runs after :after (rowid order): how many and where it ends.
SELECT count(*) AS scanned, max(k) AS upto
FROM (SELECT rowid AS k FROM runs WHERE rowid > :after ORDER BY rowid LIMIT :scan);

-- name: retention_mark
-- The horizon a delete is about to use, recorded first in the same transaction (it only moves
-- forward): `ql audit` reads it to tell pruned events from missing ones.
INSERT INTO retention_marks (subject, pruned_before_ms) VALUES ('run_events', max(0, :horizon_ms))
ON CONFLICT (subject) DO UPDATE
SET pruned_before_ms = max(pruned_before_ms, excluded.pruned_before_ms);

-- name: retention_prune_events
-- Every event of the slice's Runs that ended before the horizon; a status no transition
-- leaves, so an unfinished Run never loses an event.
DELETE FROM run_events
WHERE run_id IN (SELECT r.id FROM runs r
                 WHERE r.rowid > :after AND r.rowid <= :upto
                   AND r.status IN ('succeeded', 'failed', 'cancelled', 'timed_out')
                   AND r.finished_at_ms < :horizon_ms);

-- name: retention_sizes
-- How many rows the pruned tables hold (tests and the benchmark).
SELECT (SELECT count(*) FROM run_events) AS run_events, 0 AS claims;
