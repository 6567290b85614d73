-- name: metrics_queue
-- Queue depth for /metrics: the queued Runs (counted along runs_queued_idx, at most :cap),
-- when the oldest was queued, and the node clock (:now_ms) to age it by.
SELECT (SELECT count(*) FROM (SELECT 1 FROM runs WHERE status = 'queued' LIMIT :cap)) AS depth,
       (SELECT min(queued_at_ms) FROM runs WHERE status = 'queued') AS oldest_ms,
       :now_ms AS now_ms;
