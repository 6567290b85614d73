-- name: metrics_queue
-- Queue depth for /metrics: the queued Runs (counted along runs_queued_idx, at most %(cap)s),
-- when the oldest was queued, and one reading of the database clock to age it by.
SELECT (SELECT count(*) FROM (SELECT 1 FROM qinglong.runs WHERE status = 'queued'
                               LIMIT %(cap)s) AS queued) AS depth,
       (SELECT min(queued_at_ms) FROM qinglong.runs WHERE status = 'queued') AS oldest_ms,
       (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms;
