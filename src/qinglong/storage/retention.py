"""Retention (docs/retention.md): the pruner of a database, chosen by what it can do.

Where several processes serve the database (``Capabilities.shared``: PostgreSQL) claims are
logged and replicas prune at once, each statement reading the horizon from the database
clock (``postgres/retention.py``); where one process serves it (SQLite) only Run events are
pruned, by the node's clock, with a guard against that clock jumping ahead
(``sqlite/retention.py``). Either way a pass is ``prune()`` (calling the pruner returns the
rows it deleted). PostgreSQL code is imported only for a shared database.
"""

from __future__ import annotations

from typing import Protocol

from qinglong.clock import Clock
from qinglong.domain.retention import PRUNE_BATCH, PRUNE_STATEMENTS, PruneReport
from qinglong.storage.kernel import Database


class Pruner(Protocol):
    def prune(self) -> PruneReport: ...
    def __call__(self) -> int: ...


def open_retention(db: Database, clock: Clock, *, days: int, batch: int = PRUNE_BATCH,
                   statements: int = PRUNE_STATEMENTS) -> Pruner:
    """The pruner of ``db`` keeping ``days`` of history (0: keep everything); ``clock`` is
    the node's clock, which only a database without a clock of its own reads."""
    if db.capabilities.shared:
        from qinglong.storage.postgres.retention import PgRetention

        return PgRetention(db, days=days, batch=batch, statements=statements)
    from qinglong.storage.sqlite.retention import SqliteRetention

    return SqliteRetention(db, clock, days=days, batch=batch, statements=statements)


def table_sizes(db: Database) -> dict[str, int]:
    """Rows retention prunes, by table (``claims`` is 0 where claims are not logged)."""
    row = db.read("count retained rows", lambda tx: tx.one("retention_sizes"))
    assert row is not None
    return {"claims": int(str(row["claims"])), "run_events": int(str(row["run_events"]))}
