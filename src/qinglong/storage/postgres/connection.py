"""Connections to PostgreSQL: conninfo with keepalives, session timeouts, pools, and a
COMMIT with a client-side deadline whose notices (WARNING 01000) are captured.

Every connection is in autocommit mode; transactions are explicit (``BEGIN ...``), so a
claim is one auto-committed READ COMMITTED statement and an admission is one explicit
SERIALIZABLE transaction.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from qinglong.clock import pause
from qinglong.errors import ConnectionLost, InvalidInput
from qinglong.storage.kernel import CommitNotAcknowledged, CommitReceipt, CommitRejected
from qinglong.storage.postgres.deadlines import WATCH
from qinglong.storage.postgres.errors import connection_gone, translate
from qinglong.storage.sqlfile import load_queries

QUERIES = load_queries("qinglong.storage.postgres")
OPEN_POLL_S = 0.1  # how often PoolConnector.open looks at the pool and the stop request
PgConnection = psycopg.Connection[dict[str, Any]]

_NOTICES: weakref.WeakKeyDictionary[PgConnection, list[tuple[str, str]]] = (
    weakref.WeakKeyDictionary()
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSettings:
    """Per-session timeouts, applied when a connection is opened."""

    statement_timeout_ms: int = 5000
    lock_timeout_ms: int = 1000
    idle_in_transaction_timeout_ms: int = 10_000
    transaction_timeout_ms: int = 20_000  # PostgreSQL 17+ only


def password_from_environment() -> str | None:
    path = os.environ.get("QL_DATABASE_PASSWORD_FILE")
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8").rstrip("\n")
    except OSError as exc:
        raise InvalidInput("QL_DATABASE_PASSWORD_FILE", f"cannot read the file ({exc.strerror})") from exc


def conninfo(url: str, *, application_name: str, connect_timeout_s: int = 5) -> str:
    """The libpq conninfo for ``url`` with our defaults; ``target_session_attrs`` and
    multi-host URLs pass through unchanged."""
    extra: dict[str, Any] = {
        "application_name": application_name,
        "connect_timeout": connect_timeout_s,
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
        "tcp_user_timeout": 15_000,
    }
    password = password_from_environment()
    if password is not None:
        extra["password"] = password
    try:
        return psycopg.conninfo.make_conninfo(url, **extra)
    except psycopg.ProgrammingError as exc:
        raise InvalidInput("database-url", "is not a valid PostgreSQL URL") from exc


def _record_notice(conn: PgConnection) -> Callable[[psycopg.errors.Diagnostic], None]:
    ref = weakref.ref(conn)

    def handler(diagnostic: psycopg.errors.Diagnostic) -> None:
        owner = ref()
        if owner is not None:
            _NOTICES.setdefault(owner, []).append(
                (diagnostic.sqlstate or "", diagnostic.message_primary or "")
            )

    return handler


def prepare_session(conn: PgConnection, settings: SessionSettings | None) -> None:
    """Notice capture, and for long-lived sessions: timeouts and prepared generic plans.

    Our claim and commit statements join six tables on composite keys; PostgreSQL takes
    several milliseconds to plan them, so long-lived sessions prepare every statement on
    first use and keep one generic plan.
    """
    conn.add_notice_handler(_record_notice(conn))
    if settings is None:
        return
    conn.prepare_threshold = 0
    conn.execute(
        "SELECT set_config('statement_timeout', %(st)s, false), "
        "set_config('lock_timeout', %(lt)s, false), "
        "set_config('plan_cache_mode', 'force_generic_plan', false), "
        # A sequential scan inside a SERIALIZABLE transaction takes a predicate lock on the
        # whole relation, so once ANALYZE finds the tables small, every admission would
        # conflict with every other (40001 storms). Index and TID scans lock what they read.
        "set_config('enable_seqscan', 'off', false), "
        # the claim must run at READ COMMITTED whatever the role or database default says
        "set_config('default_transaction_isolation', 'read committed', false), "
        # JIT compiling a claim or an admission costs far more than running it (0.6-1.2 s
        # per claim at a million rows, docs/design/admission-fast-path.md)
        "set_config('jit', 'off', false), "
        "set_config('idle_in_transaction_session_timeout', %(it)s, false)",
        {
            "st": f"{settings.statement_timeout_ms}ms",
            "lt": f"{settings.lock_timeout_ms}ms",
            "it": f"{settings.idle_in_transaction_timeout_ms}ms",
        },
    )
    if conn.info.server_version >= 170000:
        conn.execute(
            "SELECT set_config('transaction_timeout', %(tt)s, false)",
            {"tt": f"{settings.transaction_timeout_ms}ms"},
        )


def connect(
    url: str, *, application_name: str, settings: SessionSettings | None = None
) -> PgConnection:
    try:
        conn = psycopg.connect(
            conninfo(url, application_name=application_name), autocommit=True, row_factory=dict_row
        )
    except psycopg.OperationalError as exc:
        raise ConnectionLost(f"cannot connect to PostgreSQL ({_reason(exc)})") from exc
    try:
        prepare_session(conn, settings)
    except psycopg.Error as exc:
        conn.close()
        raise translate(exc, "prepare session") from exc
    return conn


def _reason(exc: psycopg.OperationalError) -> str:
    """The server's complaint (after FATAL:), else libpq's first line (which host, and why)."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    if "FATAL:" in text:
        return text.split("FATAL:")[-1].strip().splitlines()[0][:200]
    return text.splitlines()[0].removeprefix("connection failed:").strip()[:200]


class Connector(Protocol):
    """Something that lends a connection for one unit of work."""

    def connection(self) -> contextlib.AbstractContextManager[PgConnection]: ...

    def close(self) -> None: ...


class SingleConnector:
    """One connection, opened on first use, reopened if it breaks (for CLI commands)."""

    def __init__(self, url: str, *, application_name: str = "ql-cli",
                 settings: SessionSettings | None = None) -> None:
        self._url = url
        self._application_name = application_name
        self._settings = settings
        self._conn: PgConnection | None = None
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def connection(self) -> Iterator[PgConnection]:
        with self._lock:
            if self._conn is None or connection_gone(self._conn):
                self._conn = connect(self._url, application_name=self._application_name,
                                     settings=self._settings)
            yield self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _recording_connection_class(
    failed: Callable[[psycopg.OperationalError], None],
) -> type[psycopg.Connection[Any]]:
    """A connection class that tells ``failed`` why a connection attempt of the pool failed
    (the pool itself only logs it)."""

    class RecordingConnection(psycopg.Connection[Any]):
        @classmethod
        def connect(cls, *args: Any, **kwargs: Any) -> Any:
            try:
                return super().connect(*args, **kwargs)
            except psycopg.OperationalError as exc:
                failed(exc)
                raise

    return RecordingConnection


def socket_quiet(conn: psycopg.Connection[Any]) -> bool:
    """Whether nothing waits to be read on an idle connection's socket. A server that ended
    the session (a restart, pg_terminate_backend, a killed backend) sends its reason and
    closes, or its host's kernel closes the socket: either way the socket turns readable. A
    healthy idle session has nothing to say, so a quiet socket needs no round trip before it
    is lent; anything else (an error, a notice, the end) gets the pool's check query. What
    no check can see in time (a partition that drops packets) fails the statement under its
    deadline instead, as it would fail the check query."""
    if conn.closed or conn.broken:
        return False
    try:
        poller = select.poll()
        poller.register(conn.pgconn.socket, select.POLLIN | select.POLLPRI)
        return not poller.poll(0)
    except (OSError, ValueError, psycopg.Error):
        return False


class PoolConnector:
    """A psycopg_pool pool; broken connections are dropped, and reported to ``on_lost``."""

    def __init__(
        self,
        url: str,
        *,
        application_name: str,
        settings: SessionSettings,
        min_size: int = 1,
        max_size: int = 4,
        on_lost: Callable[[], None] | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        self._on_lost = on_lost
        self._last_error: psycopg.OperationalError | None = None
        self._pool = ConnectionPool(
            conninfo(url, application_name=application_name),
            connection_class=_recording_connection_class(self._connect_failed),
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True, "row_factory": dict_row},
            configure=lambda conn: prepare_session(conn, settings),
            check=self._check,
            timeout=timeout_s,
            open=False,
            name=application_name,
        )

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        """Before lending ``conn``: a round trip only when its socket is not quiet."""
        if socket_quiet(conn):
            return
        try:
            ConnectionPool.check_connection(conn)
        except Exception:
            if self._on_lost is not None:
                self._on_lost()
            raise

    def _connect_failed(self, exc: psycopg.OperationalError) -> None:
        self._last_error = exc

    def open(self, wait_s: float = 10.0, cancelled: Callable[[], bool] | None = None) -> None:
        """Open and wait until the pool holds its first connections. The first failed
        connection attempt ends the wait with the server's reason; ``cancelled`` is polled
        (every 100 ms) so that a stop request need not wait for a database that is away."""
        self._pool.open(wait=False)
        polls = max(1, round(wait_s / OPEN_POLL_S))
        while self._pool.get_stats().get("pool_available", 0) < self._pool.min_size:
            failed = self._last_error
            if failed is not None:
                self._pool.close(timeout=1.0)
                raise ConnectionLost(f"cannot connect to PostgreSQL ({_reason(failed)})")
            if cancelled is not None and cancelled():
                self._pool.close(timeout=1.0)
                raise ConnectionLost("stopped while connecting to PostgreSQL")
            if polls == 0:
                self._pool.close(timeout=1.0)
                raise ConnectionLost("cannot connect to PostgreSQL (pool did not fill in time)")
            polls -= 1
            pause(OPEN_POLL_S)

    @contextlib.contextmanager
    def connection(self) -> Iterator[PgConnection]:
        try:
            with self._pool.connection() as conn:
                try:
                    yield conn
                finally:
                    # Any connection that broke while lent out means the database was lost,
                    # even if the pool would quietly replace it.
                    if connection_gone(conn) and self._on_lost is not None:
                        self._on_lost()
        except PoolTimeout as exc:
            if self._on_lost is not None:
                self._on_lost()
            raise ConnectionLost("no database connection available") from exc

    def close(self) -> None:
        self._pool.close(timeout=5.0)


# --- transactions --------------------------------------------------------------------


def _sever(conn: PgConnection) -> None:
    """Cut the connection's socket from another thread: the blocked read fails at once."""
    with contextlib.suppress(OSError, ValueError):
        fd = conn.pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def deadline(conn: PgConnection, seconds: float) -> Iterator[None]:
    """Cut the connection's socket if the block outlives ``seconds`` (a client-side bound
    that also covers waits the server cannot time out, such as synchronous replication)."""
    cut = WATCH.after(seconds, lambda: _sever(conn))
    try:
        yield
    finally:
        cut.cancel()


def commit(conn: PgConnection, *, deadline_s: float) -> CommitReceipt:
    """COMMIT with a client-side deadline; WARNING 01000 makes the receipt not durable.

    An error reply (e.g. 40001 from serializable validation at commit) raises
    CommitRejected: the outcome is known, nothing was written, and ``transactions.transact``
    may run the transaction again. Anything else after COMMIT was sent (a cut socket, the
    deadline) raises CommitNotAcknowledged: the outcome is unknown, and nothing retries it.
    """
    notices = _NOTICES.setdefault(conn, [])
    notices.clear()
    try:
        with deadline(conn, deadline_s):
            conn.execute("COMMIT")
    except psycopg.Error as exc:
        state = getattr(exc, "sqlstate", None)
        if state is not None and not connection_gone(conn, exc):
            # A definite answer: the server rolled the transaction back.
            raise CommitRejected(f"COMMIT was rejected ({state})", state) from exc
        raise CommitNotAcknowledged("COMMIT was sent but not acknowledged") from exc
    except Exception as exc:
        raise CommitNotAcknowledged("COMMIT was sent but not acknowledged") from exc
    warnings = tuple(message for state, message in notices if state == "01000")
    return CommitReceipt(durable=not warnings, warnings=warnings)


def rollback_quietly(conn: PgConnection) -> None:
    if connection_gone(conn):
        return
    with contextlib.suppress(psycopg.Error):
        conn.execute("ROLLBACK")
