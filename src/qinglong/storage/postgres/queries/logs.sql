-- name: log_append
-- Store one chunk under the Attempt's lease: nothing once the fence no longer holds, and a
-- chunk sent twice is stored once.
INSERT INTO qinglong.run_log_chunks (attempt_id, seq, part, byte_offset, data, at_ms)
SELECT %(attempt_id)s::varchar, %(seq)s::integer, %(part)s::varchar, %(byte_offset)s::bigint,
       %(data)s::bytea, (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint
FROM qinglong.run_attempts a
WHERE a.id = %(attempt_id)s AND a.lease_generation = %(generation)s
  AND a.lease_token_digest = %(digest)s AND a.status IN ('starting', 'running')
ON CONFLICT (attempt_id, seq) DO NOTHING;

-- name: log_fence_holds
-- Whether an Attempt's lease is still the one the fence names.
SELECT EXISTS (SELECT 1 FROM qinglong.run_attempts
               WHERE id = %(attempt_id)s AND lease_generation = %(generation)s
                 AND lease_token_digest = %(digest)s
                 AND status IN ('starting', 'running')) AS holds;

-- name: log_trim
-- Drop tail chunks that end before the part of the output the tail keeps.
DELETE FROM qinglong.run_log_chunks
WHERE attempt_id = %(attempt_id)s AND part = 'tail'
  AND byte_offset + length(data) <= %(keep_from)s;

-- name: log_read
-- An Attempt's chunks after a sequence number, in order.
SELECT seq, part, byte_offset, data FROM qinglong.run_log_chunks
WHERE attempt_id = %(attempt_id)s AND seq > %(after_seq)s
ORDER BY seq;

-- name: log_prune
-- Delete the output of Attempts that ended longer ago than the retention (database time),
-- a batch of Attempts at a time; starts from the chunks, which retention keeps small.
DELETE FROM qinglong.run_log_chunks c
WHERE c.attempt_id IN (
    SELECT DISTINCT k.attempt_id FROM qinglong.run_log_chunks k
    JOIN qinglong.run_attempts a ON a.id = k.attempt_id
    WHERE a.finished_at_ms < (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint
                             - %(retention_ms)s
    LIMIT %(limit)s);
