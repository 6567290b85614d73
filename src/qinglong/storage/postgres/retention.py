"""Retention on PostgreSQL: claim records and the events of ended Runs past the horizon
(docs/retention.md).

Each statement is its own short READ COMMITTED transaction deleting at most a batch, under a
transaction-level advisory lock taken without waiting: when another replica is deleting, the
statement deletes nothing and the pass ends, so any number of replicas may prune at once
without waiting for, deadlocking with or repeating each other. The horizon is read from the
database clock in every statement and recorded in ``retention_marks`` by the same transaction
(what `ql audit` reads to tell pruned evidence from missing evidence).

Both sweeps keep a cursor in memory. The claims sweep walks claims in (acquisition time,
project, trigger, version) order and wraps round at the end: a schedule row's latest claim
is kept and passed, and goes on a later sweep once a newer claim supersedes it. The events
sweep walks Runs in (end time, id) order: a Run ends at the database's now, after any
horizon already passed, so nothing behind its cursor becomes prunable later. A restart starts
both sweeps from the beginning. Each table is pruned on its own: a failure on one (a
timeout) does not stop the other.
"""

from __future__ import annotations

from qinglong.domain.retention import PRUNE_BATCH, PRUNE_STATEMENTS, PruneReport, retention_ms
from qinglong.errors import PermissionDenied
from qinglong.storage.kernel import Database, Tx
from qinglong.storage.retention import table_sizes

__all__ = ["BUSY", "PgRetention", "table_sizes"]  # (table_sizes: storage/retention.py)

_START = (-1, "")
_CLAIMS_START = (-1, "", "", -1)
BUSY = -1  # a statement that found another replica pruning scanned nothing of its own


class PgRetention:
    """Prunes claim records and Run events past ``days`` of retention (0: never)."""

    def __init__(self, db: Database, *, days: int, batch: int = PRUNE_BATCH,
                 statements: int = PRUNE_STATEMENTS) -> None:
        self._db = db
        self._retention_ms = retention_ms(days)
        self._batch = batch
        self._statements = statements
        self._after: tuple[int, str] = _START
        self._claims_after: tuple[int, str, str, int] = _CLAIMS_START
        self._allowed: bool | None = None

    def prune(self) -> PruneReport:
        """One pass: claims, then events, at most ``statements`` statements each, stopping
        early once a statement finds less than a batch."""
        if self._retention_ms is None or not self._check_allowed():
            return PruneReport()
        claims = events = statements = 0
        failure: Exception | None = None
        try:  # each table on its own: a failure on one does not stop the other
            for _ in range(self._statements):
                statements += 1
                deleted, scanned, reached = self._prune_claims(self._retention_ms)
                claims += deleted
                if reached is not None:
                    self._claims_after = reached
                if scanned < self._batch:
                    if scanned != BUSY:  # the end: the next sweep starts over
                        self._claims_after = _CLAIMS_START
                    break
        except Exception as exc:  # noqa: BLE001 - raised after the events had their turn
            failure = exc
        for _ in range(self._statements):
            statements += 1
            deleted, scanned, last = self._prune_events(self._retention_ms)
            events += deleted
            if last is not None:
                self._after = last
            if scanned < self._batch:
                break
        if failure is not None:
            raise failure
        return PruneReport(claims=claims, events=events, statements=statements)

    def __call__(self) -> int:
        return self.prune().deleted

    def _check_allowed(self) -> bool:
        """Once: may this role delete? If not, say so once (a diagnostic) and prune nothing."""
        if self._allowed is None:
            row = self._db.read("check the retention privileges",
                                lambda tx: tx.one("retention_allowed"))
            self._allowed = bool(row and row["allowed"])
            if not self._allowed:
                raise PermissionDenied(
                    "retention: this role may not DELETE from trigger_schedule_claims and "
                    "run_events or record retention_marks; apply the retention migration (`ql db migrate` as a "
                    "superuser) or run with --retention-days 0; nothing is pruned until the "
                    "replica restarts")
        return self._allowed

    def _prune_claims(self, retention: int) -> tuple[int, int, tuple[int, str, str, int] | None]:
        after_ms, after_project, after_trigger, after_version = self._claims_after

        def work(tx: Tx) -> tuple[int, int, tuple[int, str, str, int] | None]:
            if not _gate(tx):
                return 0, BUSY, None  # another replica is pruning: end this pass
            horizon = _mark(tx, "claims", retention)
            row = tx.one("retention_prune_claims", {
                "horizon_ms": horizon, "limit": self._batch, "after_ms": after_ms,
                "after_project": after_project, "after_trigger": after_trigger,
                "after_version": after_version})
            assert row is not None
            last = (None if row["last_ms"] is None
                    else (int(str(row["last_ms"])), str(row["last_project"]),
                          str(row["last_trigger"]), int(str(row["last_version"]))))
            return int(str(row["deleted"])), int(str(row["scanned"])), last

        return self._db.write("prune claim records past retention", work,
                              isolation="read committed")

    def _prune_events(self, retention: int) -> tuple[int, int, tuple[int, str] | None]:
        after_ms, after_id = self._after

        def work(tx: Tx) -> tuple[int, int, tuple[int, str] | None]:
            if not _gate(tx):
                return 0, 0, None  # another replica is pruning: end this pass
            horizon = _mark(tx, "run_events", retention)
            row = tx.one("retention_prune_events", {
                "horizon_ms": horizon, "limit": self._batch,
                "after_ms": after_ms, "after_id": after_id})
            assert row is not None
            last = (None if row["last_ms"] is None
                    else (int(str(row["last_ms"])), str(row["last_id"])))
            return int(str(row["deleted"])), int(str(row["scanned"])), last

        return self._db.write("prune run events past retention", work,
                              isolation="read committed")


def _mark(tx: Tx, subject: str, retention: int) -> int:
    """This statement's horizon, recorded in retention_marks in the same transaction."""
    row = tx.one("retention_mark", {"subject": subject, "retention_ms": retention})
    assert row is not None
    return int(str(row["horizon_ms"]))


def _gate(tx: Tx) -> bool:
    row = tx.one("retention_gate")
    return bool(row and row["held"])

