"""Open the storage named by a database URL. PostgreSQL code is imported only for its URLs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from qinglong.clock import Clock
from qinglong.errors import InvalidInput
from qinglong.storage.admission import RequestAdmissions
from qinglong.storage.definitions import DefinitionStore
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.logs import LogStore

DEFAULT_DATABASE_URL = "sqlite:///./qinglong.db"


@dataclass(slots=True)
class Backend:
    kind: str  # "sqlite" or "postgresql"
    definitions: DefinitionStore
    runs: RunStore
    lifecycle: RunStore
    logs: LogStore | None  # output kept in the database (cluster); None: log files
    close: Callable[[], None]
    manual: RequestAdmissions  # run now: `ql task run`, `ql trigger fire`
    backfill: RequestAdmissions  # `ql trigger backfill`


def url_kind(url: str) -> str:
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "sqlite":
        return "sqlite"
    if scheme in ("postgresql", "postgres"):
        return "postgresql"
    raise InvalidInput("database-url", "must start with sqlite:/// or postgresql://")


def open_backend(url: str, clock: Clock) -> Backend:
    """Open a migrated database for definitions and run reads."""
    kind = url_kind(url)
    if kind == "sqlite":
        from qinglong.storage.sqlite.backfill import SqliteBackfillStore
        from qinglong.storage.sqlite.connection import SqliteDatabase, sqlite_path_from_url
        from qinglong.storage.sqlite.definitions import SqliteDefinitionStore
        from qinglong.storage.sqlite.manual_runs import SqliteManualRunStore
        from qinglong.storage.sqlite.migrate import check_schema
        from qinglong.storage.sqlite.runs import SqliteRunStore

        db = SqliteDatabase(sqlite_path_from_url(url))
        try:
            check_schema(db)
        except BaseException:
            db.close()
            raise
        runs = SqliteRunStore(db, clock, actor_id="cli")
        return Backend(
            kind=kind,
            definitions=SqliteDefinitionStore(db, clock),
            runs=runs,
            lifecycle=runs,
            logs=None,
            close=db.close,
            manual=SqliteManualRunStore(db, clock),
            backfill=SqliteBackfillStore(db, clock),
        )
    from qinglong.profiles.cluster_backend import open_postgres_backend

    return open_postgres_backend(url)
