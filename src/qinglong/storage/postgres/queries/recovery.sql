-- name: recovery_candidates
-- Work a crashed control plane may have left half-done, minus the pristine scheduler admission
-- (a queued Run whose only Attempt is the untouched claimed remote_worker Attempt).
WITH observed AS MATERIALIZED (
    SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms
),
attempt_candidates AS (
    SELECT 'attempt' AS kind, a.id, a.run_id, a.status, a.created_at_ms
    FROM qinglong.run_attempts a
    JOIN qinglong.runs r ON r.id = a.run_id
    CROSS JOIN observed o
    WHERE a.status IN ('claimed', 'starting', 'running')
      AND (a.lease_expires_at_ms IS NULL OR a.lease_expires_at_ms <= o.now_ms)
      AND NOT (
          r.execution_owner = 'runtime' AND r.status = 'queued'
          AND r.cancel_requested_at_ms IS NULL AND r.queued_at_ms IS NOT NULL
          AND a.status = 'claimed' AND a.executor_type = 'remote_worker'
          AND a.worker_id IS NULL AND a.worker_session_id IS NULL AND a.worker_generation IS NULL
          AND a.executor_handle IS NULL AND a.pid IS NULL AND a.log_artifact_id IS NULL
          AND a.lease_token IS NULL AND a.lease_token_digest IS NULL
          AND a.lease_generation IS NULL AND a.lease_version IS NULL
          AND a.lease_expires_at_ms IS NULL AND a.offer_id IS NULL AND a.deadline_at_ms IS NULL
          AND a.callback_token_hash IS NULL AND a.callback_sequence = 0
          AND a.started_at_ms IS NULL AND a.finished_at_ms IS NULL AND a.exit_code IS NULL
          AND a.error_code IS NULL AND a.error_summary IS NULL
          AND NOT EXISTS (SELECT 1 FROM qinglong.run_attempts newer
                          WHERE newer.run_id = a.run_id AND newer.attempt > a.attempt)
      )
    ORDER BY a.created_at_ms, a.id
    LIMIT %(limit)s + 1
),
run_candidates AS (
    SELECT 'run' AS kind, r.id, r.id AS run_id, r.status, r.created_at_ms
    FROM qinglong.runs r
    CROSS JOIN observed o
    WHERE r.execution_owner = 'runtime'
      AND (r.status = 'created'
           OR (r.status IN ('dispatching', 'running') AND NOT EXISTS (
                SELECT 1 FROM qinglong.run_attempts a
                WHERE a.run_id = r.id AND a.status IN ('claimed', 'starting', 'running')
                  AND a.lease_expires_at_ms > o.now_ms)))
    ORDER BY r.created_at_ms, r.id
    LIMIT %(limit)s + 1
)
SELECT kind, id, run_id, status, created_at_ms FROM (
    SELECT * FROM attempt_candidates UNION ALL SELECT * FROM run_candidates
) candidates
ORDER BY created_at_ms, kind, id
LIMIT %(limit)s + 1;
