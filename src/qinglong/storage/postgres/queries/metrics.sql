-- name: metrics_queue
-- Queue depth for /metrics: the queued Runs (counted along runs_queued_idx, at most %(cap)s),
-- when the oldest was queued, and one reading of the database clock to age it by.
SELECT (SELECT count(*) FROM (SELECT 1 FROM qinglong.runs WHERE status = 'queued'
                               LIMIT %(cap)s) AS queued) AS depth,
       (SELECT min(queued_at_ms) FROM qinglong.runs WHERE status = 'queued') AS oldest_ms,
       (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms;

-- name: metrics_queue_placement
-- The queued Runs that require worker labels (docs/controls/placement.md), by requirement
-- set: how many (of the first %(cap)s read along runs_queued_idx) and when the oldest was
-- queued; the %(groups)s largest sets.
SELECT q.requires::text AS requires, count(*) AS depth, min(q.queued_at_ms) AS oldest_ms
FROM (SELECT requires, queued_at_ms FROM qinglong.runs
      WHERE status = 'queued' AND requires IS NOT NULL LIMIT %(cap)s) AS q
GROUP BY q.requires::text
ORDER BY depth DESC, requires
LIMIT %(groups)s;

-- name: metrics_live_offers
-- The labels each executor seen since %(since_ms)s and not stopped offers (a worker, or
-- `ql serve`): what a queued Run's requirements are held against.
SELECT labels::text AS labels FROM qinglong.instances
WHERE role IN ('worker', 'serve') AND stopped_at_ms IS NULL AND seen_at_ms >= %(since_ms)s;
