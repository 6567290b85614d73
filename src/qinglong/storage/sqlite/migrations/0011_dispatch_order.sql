-- The executor's lease statement (lease_candidates) reads queued Runs in dispatch order and
-- stops after the few it needs: without an index in that order it sorted the whole queue
-- on every lease, so a burst of 10,000 queued Runs made each lease cost a read of all of
-- them (and held the database's one write lock meanwhile).
CREATE INDEX runs_dispatch_idx ON runs (priority DESC, queued_at_ms, id)
    WHERE status = 'queued' AND cancel_requested_at_ms IS NULL;
