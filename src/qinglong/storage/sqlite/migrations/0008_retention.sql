-- Retention (docs/retention.md): `ql serve` deletes the events of Runs that ended longer ago
-- than --retention-days (default 30). retention_marks records the latest horizon used,
-- written in the same transaction as each delete, so `ql audit` can tell events retention
-- removed (before the mark) from events that are missing (a violation). No mark: nothing
-- was pruned.
CREATE TABLE retention_marks (
    subject          TEXT    NOT NULL PRIMARY KEY CHECK (subject IN ('claims', 'run_events')),
    pruned_before_ms INTEGER NOT NULL CHECK (pruned_before_ms >= 0)
) STRICT;
