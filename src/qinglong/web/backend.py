"""What the HTTP API serves from: the service objects over the stores of one database.

``open_web_backend`` is the one wiring function of the web surface: SQLite for `ql serve
--http` (and `ql web` on a SQLite file), a connection pool as ``ql_web`` for `ql web` on
PostgreSQL. PostgreSQL code is imported only for a PostgreSQL URL.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from qinglong.clock import Clock
from qinglong.profiles.backends import url_kind
from qinglong.service.accounts import Accounts, SessionPolicy
from qinglong.service.catalog import Catalog
from qinglong.service.ledger import TriggerLedger
from qinglong.service.manual import ManualRuns
from qinglong.service.run_pages import RunPages
from qinglong.service.runs import RunViews
from qinglong.service.stats import TaskStats
from qinglong.storage.admission import RequestAdmissions
from qinglong.storage.notify import NotifyStore
from qinglong.storage.ports import InstanceStore
from qinglong.storage.runs import RunStore

WEB_POOL_SIZE = 8


@dataclass(slots=True, kw_only=True)
class WebBackend:
    kind: str  # "sqlite" or "postgresql"
    catalog: Catalog
    runs: RunViews
    manual: ManualRuns
    ledger: TriggerLedger
    pages: RunPages
    stats: TaskStats
    accounts: Accounts
    instances: InstanceStore
    backfill: RequestAdmissions  # backfills admitted over the API
    notify: NotifyStore  # notification channels, rules and the outbox
    lifecycle_for: Callable[[str], RunStore]  # cancels recorded as this user
    runs_for: Callable[[str], RunViews]
    ping: Callable[[], None]  # one round trip to the database (readiness)
    close: Callable[[], None]
    on_admitted: list[Callable[[], None]] = field(default_factory=list)  # e.g. poke `ql serve`
    closing: threading.Event = field(default_factory=threading.Event)  # set when stopping


def open_web_backend(url: str, clock: Clock, *, pool_size: int = WEB_POOL_SIZE,
                     session_policy: SessionPolicy | None = None,
                     application_name: str = "ql-web") -> WebBackend:
    if url_kind(url) == "sqlite":
        return _sqlite(url, clock, session_policy)
    return _postgres(url, clock, pool_size, session_policy, application_name)


def _sqlite(url: str, clock: Clock, policy: SessionPolicy | None) -> WebBackend:
    from qinglong.storage.sqlite.accounts import SqliteAccountStore
    from qinglong.storage.sqlite.backfill import SqliteBackfillStore
    from qinglong.storage.sqlite.connection import SqliteDatabase, sqlite_path_from_url
    from qinglong.storage.sqlite.definitions import SqliteDefinitionStore
    from qinglong.storage.sqlite.instances import SqliteInstanceStore
    from qinglong.storage.sqlite.manual_runs import SqliteManualRunStore
    from qinglong.storage.sqlite.migrate import check_schema
    from qinglong.storage.sqlite.notify import SqliteNotifyStore
    from qinglong.storage.sqlite.runs import SqliteRunStore
    from qinglong.storage.sqlite.web_reads import SqliteWebReadStore

    db = SqliteDatabase(sqlite_path_from_url(url))
    try:
        check_schema(db)
    except BaseException:
        db.close()
        raise
    runs = SqliteRunStore(db, clock, actor_id="web")

    def lifecycle_for(actor: str) -> RunStore:
        return SqliteRunStore(db, clock, actor_id=actor)

    def runs_for(actor: str) -> RunViews:
        return RunViews(runs, lifecycle=lifecycle_for(actor))

    def ping() -> None:
        with db.read("check the database") as conn:
            conn.execute("SELECT 1").fetchone()

    return WebBackend(
        kind="sqlite",
        catalog=Catalog(SqliteDefinitionStore(db, clock), clock),
        runs=RunViews(runs, lifecycle=runs),
        manual=ManualRuns(SqliteManualRunStore(db, clock), runs),
        ledger=TriggerLedger(runs),
        pages=RunPages(SqliteWebReadStore(db)),
        stats=TaskStats(SqliteWebReadStore(db)),
        accounts=Accounts(SqliteAccountStore(db, clock), policy=policy),
        instances=SqliteInstanceStore(db, clock),
        backfill=SqliteBackfillStore(db, clock),
        notify=SqliteNotifyStore(db, clock),
        lifecycle_for=lifecycle_for,
        runs_for=runs_for,
        ping=ping,
        close=db.close,
    )


def _postgres(url: str, clock: Clock, pool_size: int, policy: SessionPolicy | None,
              application_name: str) -> WebBackend:
    from qinglong.errors import NotReady
    from qinglong.storage.postgres.accounts import PgAccountStore
    from qinglong.storage.postgres.backfill import PgBackfillStore
    from qinglong.storage.postgres.definitions import PgDefinitionStore
    from qinglong.storage.postgres.instances import PgInstanceStore
    from qinglong.storage.postgres.logs import PgLogStore
    from qinglong.storage.postgres.manual_runs import PgManualRunStore
    from qinglong.storage.postgres.notify import PgNotifyStore
    from qinglong.storage.postgres.readiness import audit
    from qinglong.storage.postgres.roles import WEB
    from qinglong.storage.postgres.runs import PgRunStore
    from qinglong.storage.postgres.topology import choose_primary
    from qinglong.storage.postgres.web_pool import WebPool
    from qinglong.storage.postgres.web_reads import PgWebReadStore

    target = choose_primary(url, application_name=application_name)
    connector = WebPool(target, application_name=application_name, max_size=pool_size)
    try:
        connector.open()
        with connector.connection() as conn:
            findings = audit(conn)
            who = conn.info.user
        if not findings and who != WEB:
            findings = [f"wrong-role:{who}"]
        if findings:
            raise NotReady(findings, None if who == WEB else (
                f"ql web connects as {WEB} (the role with exactly the API's privileges), not "
                f"{who}: " + ", ".join(findings)))
    except BaseException:
        connector.close()
        raise
    runs = PgRunStore(connector, actor_id="web")
    logs = PgLogStore(connector)

    def lifecycle_for(actor: str) -> RunStore:
        return PgRunStore(connector, actor_id=actor)

    def runs_for(actor: str) -> RunViews:
        return RunViews(runs, lifecycle=lifecycle_for(actor), logs=logs)

    def ping() -> None:
        with connector.connection() as conn:
            conn.execute("SELECT 1").fetchone()

    return WebBackend(
        kind="postgresql",
        catalog=Catalog(PgDefinitionStore(connector), clock),
        runs=RunViews(runs, lifecycle=runs, logs=logs),
        manual=ManualRuns(PgManualRunStore(connector), runs),
        ledger=TriggerLedger(runs),
        pages=RunPages(PgWebReadStore(connector)),
        stats=TaskStats(PgWebReadStore(connector)),
        accounts=Accounts(PgAccountStore(connector), policy=policy),
        instances=PgInstanceStore(connector),
        backfill=PgBackfillStore(connector),
        notify=PgNotifyStore(connector),
        lifecycle_for=lifecycle_for,
        runs_for=runs_for,
        ping=ping,
        close=connector.close,
    )


def open_accounts(url: str, clock: Clock) -> tuple[Accounts, Callable[[], None]]:
    """The accounts alone (`ql user`, `ql token`), and how to close them. On PostgreSQL,
    connect as ql_web: the role that keeps them."""
    if url_kind(url) == "sqlite":
        from qinglong.storage.sqlite.accounts import SqliteAccountStore
        from qinglong.storage.sqlite.connection import SqliteDatabase, sqlite_path_from_url
        from qinglong.storage.sqlite.migrate import check_schema

        db = SqliteDatabase(sqlite_path_from_url(url))
        try:
            check_schema(db)
        except BaseException:
            db.close()
            raise
        return Accounts(SqliteAccountStore(db, clock)), db.close
    from qinglong.storage.postgres.accounts import PgAccountStore
    from qinglong.storage.postgres.connection import SingleConnector

    connector = SingleConnector(url, application_name="ql-cli")
    return Accounts(PgAccountStore(connector)), connector.close
