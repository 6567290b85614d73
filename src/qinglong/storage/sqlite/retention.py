"""Retention on SQLite: the events of Runs that ended before the horizon (docs/retention.md).

SQLite keeps no claim log, so only ``run_events`` is pruned. One `ql serve` serves a file,
so a pass sweeps the runs table in rowid order, a slice per statement (each its own short
``BEGIN IMMEDIATE`` transaction), wrapping round at the end; the horizon is read from the
injected clock and recorded in ``retention_marks`` by the transaction that deletes. A pass
after the wall clock jumped ahead of the monotonic clock is skipped (see ``_clock_jumped``).
"""

from __future__ import annotations

from qinglong.clock import Clock
from qinglong.domain.retention import (
    CLOCK_JUMP_PATIENCE,
    CLOCK_JUMP_TOLERANCE_MS,
    PRUNE_BATCH,
    PRUNE_STATEMENTS,
    PruneReport,
    retention_ms,
)
from qinglong.storage.kernel import Database, Tx


class SqliteRetention:
    """Prunes ``run_events`` past ``days`` of retention (0: never)."""

    def __init__(self, db: Database, clock: Clock, *, days: int,
                 batch: int = PRUNE_BATCH, statements: int = PRUNE_STATEMENTS) -> None:
        self._db = db
        self._clock = clock
        self._retention_ms = retention_ms(days)
        self._batch = batch
        self._statements = statements
        self._after = 0  # the sweep's position (a runs rowid)
        self._seen: tuple[int, float] | None = None  # (wall ms, monotonic s) of the last pass
        self._jumped = 0  # passes skipped in a row because the wall clock jumped ahead

    def prune(self) -> PruneReport:
        """One pass: at most ``statements`` slices of ``batch`` Runs; stops at the end of the
        table (the next pass starts the sweep again)."""
        if self._retention_ms is None or self._clock_jumped():
            return PruneReport()
        horizon = self._clock.now_ms() - self._retention_ms

        def one_slice(tx: Tx) -> tuple[int, int | None, int]:
            return self._slice(tx, horizon)

        events = statements = 0
        while statements < self._statements:
            statements += 1
            scanned, upto, deleted = self._db.write("prune run events past retention",
                                                    one_slice)
            events += deleted
            if scanned < self._batch or upto is None:
                self._after = 0
                break
            self._after = upto
        return PruneReport(events=events, statements=statements)

    def _slice(self, tx: Tx, horizon: int) -> tuple[int, int | None, int]:
        """One slice of the sweep: Runs scanned, the last rowid scanned, events deleted."""
        row = tx.one("retention_events_slice", {"after": self._after, "scan": self._batch})
        assert row is not None
        scanned, upto = int(row["scanned"]), row["upto"]
        if upto is None:
            return scanned, None, 0
        tx.execute("retention_mark", {"horizon_ms": horizon})
        deleted = tx.execute("retention_prune_events", {
            "after": self._after, "upto": int(upto), "horizon_ms": horizon}).rowcount
        return scanned, int(upto), deleted

    def _clock_jumped(self) -> bool:
        """Whether the wall clock ran ahead of the monotonic clock since the last pass by more
        than CLOCK_JUMP_TOLERANCE_MS: a clock set wrong would delete recent history for good,
        so such passes are skipped until the new clock has held for CLOCK_JUMP_PATIENCE
        passes (a deliberate correction is then believed)."""
        wall, mono = self._clock.now_ms(), self._clock.monotonic()
        if self._seen is not None:
            last_wall, last_mono = self._seen
            ahead = (wall - last_wall) - (mono - last_mono) * 1000
            if ahead > CLOCK_JUMP_TOLERANCE_MS and self._jumped < CLOCK_JUMP_PATIENCE:
                self._jumped += 1
                return True
        self._seen, self._jumped = (wall, mono), 0
        return False

    def __call__(self) -> int:
        return self.prune().deleted

