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

from dataclasses import dataclass

from qinglong.domain.retention import PRUNE_BATCH, PRUNE_STATEMENTS, PruneReport, retention_ms
from qinglong.errors import PermissionDenied
from qinglong.storage.dbapi import Row
from qinglong.storage.kernel import Database, Tx
from qinglong.storage.retention import table_sizes

__all__ = ["BUSY", "PgRetention", "table_sizes"]  # (table_sizes: storage/retention.py)

BUSY = -1  # a statement that found another replica pruning scanned nothing of its own
Cursor = tuple[int | str, ...]


@dataclass(slots=True)
class _Sweep:
    """One table's sweep: its statement, the columns of the order it walks (each returned as
    ``last_<name>`` and passed back as ``after_<name>``), and where it stands."""

    action: str
    subject: str  # its row of retention_marks
    query: str
    order: tuple[tuple[str, type[int | str]], ...]
    wraps: bool  # at the end it starts over (else nothing behind it becomes prunable later)
    after: Cursor = ()

    def __post_init__(self) -> None:
        self.after = self.start

    @property
    def start(self) -> Cursor:
        return tuple(-1 if kind is int else "" for _, kind in self.order)

    def arguments(self) -> dict[str, int | str]:
        return {f"after_{name}": value for (name, _), value in zip(self.order, self.after,
                                                                   strict=True)}

    def reached(self, row: Row) -> Cursor | None:
        if row["last_ms"] is None:
            return None
        return tuple(kind(str(row[f"last_{name}"])) for name, kind in self.order)


class PgRetention:
    """Prunes claim records and Run events past ``days`` of retention (0: never)."""

    def __init__(self, db: Database, *, days: int, batch: int = PRUNE_BATCH,
                 statements: int = PRUNE_STATEMENTS) -> None:
        self._db = db
        self._retention_ms = retention_ms(days)
        self._batch = batch
        self._statements = statements
        self._claims = _Sweep("prune claim records past retention", "claims",
                              "retention_prune_claims", wraps=True,
                              order=(("ms", int), ("project", str), ("trigger", str),
                                     ("version", int)))
        self._events = _Sweep("prune run events past retention", "run_events",
                              "retention_prune_events", wraps=False,
                              order=(("ms", int), ("id", str)))
        self._allowed: bool | None = None

    def prune(self) -> PruneReport:
        """One pass: claims, then events, at most ``statements`` statements each, stopping
        early once a statement finds less than a batch."""
        if self._retention_ms is None or not self._check_allowed():
            return PruneReport()
        failure: Exception | None = None
        claims = claim_statements = 0
        try:  # each table on its own: a failure on one does not stop the other
            claims, claim_statements = self._sweep(self._claims, self._retention_ms)
        except Exception as exc:  # noqa: BLE001 - raised after the events had their turn
            failure = exc
        events, event_statements = self._sweep(self._events, self._retention_ms)
        if failure is not None:
            raise failure
        return PruneReport(claims=claims, events=events,
                           statements=claim_statements + event_statements)

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

    def _sweep(self, sweep: _Sweep, retention: int) -> tuple[int, int]:
        """Up to ``statements`` statements of one sweep: (rows deleted, statements run)."""
        deleted = statements = 0
        for _ in range(self._statements):
            statements += 1
            count, scanned, reached = self._prune(sweep, retention)
            deleted += count
            if reached is not None:
                sweep.after = reached
            if scanned < self._batch:
                if sweep.wraps and scanned != BUSY:  # the end: the next sweep starts over
                    sweep.after = sweep.start
                break
        return deleted, statements

    def _prune(self, sweep: _Sweep, retention: int) -> tuple[int, int, Cursor | None]:
        """One statement: rows deleted, rows scanned (BUSY: another replica is pruning), and
        where the slice ended."""
        arguments = sweep.arguments()

        def work(tx: Tx) -> tuple[int, int, Cursor | None]:
            if not _gate(tx):
                return 0, BUSY, None  # another replica is pruning: end this pass
            horizon = _mark(tx, sweep.subject, retention)
            row = tx.one(sweep.query, {"horizon_ms": horizon, "limit": self._batch,
                                       **arguments})
            assert row is not None
            return int(str(row["deleted"])), int(str(row["scanned"])), sweep.reached(row)

        return self._db.write(sweep.action, work, isolation="read committed")


def _mark(tx: Tx, subject: str, retention: int) -> int:
    """This statement's horizon, recorded in retention_marks in the same transaction."""
    row = tx.one("retention_mark", {"subject": subject, "retention_ms": retention})
    assert row is not None
    return int(str(row["horizon_ms"]))


def _gate(tx: Tx) -> bool:
    row = tx.one("retention_gate")
    return bool(row and row["held"])

