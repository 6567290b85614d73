"""The dispatcher as each profile runs it: `ql serve` on its SQLite file, every `ql control`
replica on its own PostgreSQL connection (PostgreSQL code is imported only for the latter)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from qinglong.clock import Clock
from qinglong.diagnostics import DiagnosticSink
from qinglong.loops import PacedLoop, StopResult

if TYPE_CHECKING:  # the dispatcher and its network modules load when a service is built
    from qinglong.notify.dispatcher import Dispatcher, NotifyReport, NotifySettings
    from qinglong.storage.notify_ports import NotifyStore
    from qinglong.storage.sqlite.connection import SqliteDatabase

LOOP_NAME = "ql-notify"


class NotifyService:
    """The dispatcher's loop and what it owns; ``stop`` waits for the cycle in flight (a send
    is bounded by its channel's timeout), then closes what the loop opened."""

    def __init__(self, dispatcher: Dispatcher, *, interval_s: float, stop_timeout_s: float,
                 diagnostics: DiagnosticSink | None, close: Callable[[], None]) -> None:
        self.dispatcher = dispatcher
        self._close = close
        self.loop: PacedLoop[NotifyReport] = PacedLoop(
            lambda: dispatcher.run_cycle(self.loop.stop_requested), interval_s=interval_s,
            stop_timeout_s=stop_timeout_s, diagnostics=diagnostics, name=LOOP_NAME)

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> StopResult:
        result = self.loop.stop()
        if result is StopResult.STOPPED:
            self._close()
        return result


def _service(store: NotifyStore, clock: Clock, *, owner: str, stop_timeout_s: float,
             diagnostics: DiagnosticSink | None, settings: NotifySettings | None,
             close: Callable[[], None]) -> NotifyService:
    from qinglong.notify.dispatcher import Dispatcher, NotifySettings
    from qinglong.notify.senders import Sender

    settings = settings or NotifySettings()
    dispatcher = Dispatcher(store, Sender(clock), clock, owner=owner, settings=settings,
                            diagnostics=diagnostics)
    return NotifyService(dispatcher, interval_s=settings.interval_s,
                         stop_timeout_s=stop_timeout_s, diagnostics=diagnostics, close=close)


def local_service(db: SqliteDatabase, clock: Clock, *, owner: str, stop_timeout_s: float,
                  diagnostics: DiagnosticSink | None,
                  settings: NotifySettings | None = None) -> NotifyService:
    """`ql serve`'s dispatcher. Call while holding the serve lock: attempts a previous server
    left in flight are released at once (at-least-once: they are sent again)."""
    from qinglong.storage.sqlite.notify import SqliteNotifyStore

    store = SqliteNotifyStore(db, clock)
    store.outbox_release()
    return _service(store, clock, owner=owner, stop_timeout_s=stop_timeout_s,
                    diagnostics=diagnostics, settings=settings, close=lambda: None)


def cluster_service(url: str, clock: Clock, *, owner: str, stop_timeout_s: float,
                    diagnostics: DiagnosticSink | None,
                    settings: NotifySettings | None = None) -> NotifyService:
    """A `ql control` replica's dispatcher, on a connection of its own (opened on first use,
    reopened after a failure) so it never takes one from the scheduler's pool."""
    from qinglong.storage.postgres.connection import SessionSettings, SingleConnector
    from qinglong.storage.postgres.notify import PgNotifyStore

    connector = SingleConnector(url, application_name=f"ql-notify:{owner}"[:63],
                                settings=SessionSettings(statement_timeout_ms=5_000,
                                                         lock_timeout_ms=1_000,
                                                         idle_in_transaction_timeout_ms=10_000,
                                                         transaction_timeout_ms=20_000))
    return _service(PgNotifyStore(connector), clock, owner=owner,
                    stop_timeout_s=stop_timeout_s, diagnostics=diagnostics, settings=settings,
                    close=connector.close)


def open_store(url: str, clock: Clock) -> tuple[NotifyStore, Callable[[], None]]:
    """The NotifyStore of a migrated database named by ``url`` (for the CLI), and its close."""
    from qinglong.profiles.backends import url_kind

    if url_kind(url) == "sqlite":
        from qinglong.storage.sqlite.connection import SqliteDatabase, sqlite_path_from_url
        from qinglong.storage.sqlite.migrate import check_schema
        from qinglong.storage.sqlite.notify import SqliteNotifyStore

        db = SqliteDatabase(sqlite_path_from_url(url))
        try:
            check_schema(db)
        except BaseException:
            db.close()
            raise
        return SqliteNotifyStore(db, clock), db.close
    from qinglong.errors import NotReady
    from qinglong.storage.postgres.connection import SingleConnector
    from qinglong.storage.postgres.notify import PgNotifyStore
    from qinglong.storage.postgres.readiness import schema_findings, server_findings

    connector = SingleConnector(url, application_name="ql-cli")
    try:
        with connector.connection() as conn:
            findings, _ = server_findings(conn)
            findings += schema_findings(conn)
    except BaseException:
        connector.close()
        raise
    if findings:
        connector.close()
        raise NotReady(findings)
    return PgNotifyStore(connector), connector.close
