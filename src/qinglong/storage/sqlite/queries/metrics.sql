-- name: metrics_queue
-- Queue depth for /metrics: the queued Runs (counted along runs_queued_idx, at most :cap),
-- when the oldest was queued, and the node clock (:now_ms) to age it by.
SELECT (SELECT count(*) FROM (SELECT 1 FROM runs WHERE status = 'queued' LIMIT :cap)) AS depth,
       (SELECT min(queued_at_ms) FROM runs WHERE status = 'queued') AS oldest_ms,
       :now_ms AS now_ms;

-- name: metrics_queue_placement
-- The queued Runs that require worker labels, by requirement set (as on PostgreSQL).
SELECT q.requires AS requires, count(*) AS depth, min(q.queued_at_ms) AS oldest_ms
FROM (SELECT requires, queued_at_ms FROM runs
      WHERE status = 'queued' AND requires IS NOT NULL LIMIT :cap) AS q
GROUP BY q.requires
ORDER BY depth DESC, requires
LIMIT :groups;

-- name: metrics_live_offers
-- The labels each live executor offers (as on PostgreSQL).
SELECT labels FROM instances
WHERE role IN ('worker', 'serve') AND stopped_at_ms IS NULL AND seen_at_ms >= :since_ms;
