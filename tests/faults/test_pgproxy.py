"""The fault-injecting PostgreSQL proxy, against real servers: each mode really happens.

Every connection has a short connect_timeout and every wait is bounded, so a proxy that
holds traffic it should pass fails a test instead of hanging it. Connections come from the
``connect`` fixture, which stops the proxy before closing them: a statement a failed test
left held is released first (closing a psycopg connection through ``with`` would wait for
the lock that statement holds).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import psycopg
import pytest

from testkit.pgproxy import BackendScanner, PgProxy, ProtocolViolation, ProxyMode
from tests.support.pg import PgTestDatabase

WAIT = 5.0  # seconds any single wait may take before the test fails
MiB = 1024 * 1024
Conn = psycopg.Connection[tuple[object, ...]]


@dataclass
class Background:
    """A statement running on its own thread, so a test can watch it being held."""

    fn: Callable[[], object]
    result: list[object] = field(default_factory=list)
    error: list[BaseException] = field(default_factory=list)
    thread: threading.Thread | None = None

    def start(self) -> Background:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            self.result.append(self.fn())
        except BaseException as exc:
            self.error.append(exc)

    def running(self) -> bool:
        assert self.thread is not None
        return self.thread.is_alive()

    def join(self, timeout: float = WAIT) -> None:
        assert self.thread is not None
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"still running after {timeout}s"


@pytest.fixture(autouse=True)
def no_proxy_complaints(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The proxy's loop logs nothing at warning level or above: no unhandled errors."""
    yield
    complaints = [r for r in caplog.records if r.levelno >= logging.WARNING
                  and r.name.split(".")[0] in ("asyncio", "qinglong")]
    assert complaints == [], [r.getMessage() for r in complaints]


@pytest.fixture
def probe(pg_db: PgTestDatabase) -> PgTestDatabase:
    """A table the runtime role may write, checked directly (not through the proxy)."""
    pg_db.execute("CREATE TABLE proxy_probe (id integer PRIMARY KEY, "
                  "payload text NOT NULL DEFAULT '')")
    pg_db.execute("GRANT SELECT, INSERT ON proxy_probe TO ql_runtime")
    return pg_db


@pytest.fixture
def proxy(pg_db: PgTestDatabase) -> Iterator[PgProxy]:
    proxy = PgProxy(pg_db.server.host, pg_db.server.port).start()
    try:
        yield proxy
    finally:
        proxy.stop()


class Connect(Protocol):
    def __call__(self, app: str = ..., *, autocommit: bool = ..., **params: str | int) -> Conn:
        ...


@pytest.fixture
def connect(proxy: PgProxy, pg_db: PgTestDatabase) -> Iterator[Connect]:
    """Open ql_runtime connections through ``proxy`` (no encryption asked unless overridden)."""
    conns: list[Conn] = []

    def open_(app: str = "pgproxy-test", *, autocommit: bool = False, **params: str | int) -> Conn:
        params = {"sslmode": "disable", "gssencmode": "disable", **params}
        url = proxy.route(pg_db.url("ql_runtime"), application_name=app, connect_timeout=5,
                          **params)
        conn = psycopg.connect(url, autocommit=autocommit)
        conns.append(conn)
        return conn

    yield open_
    proxy.stop()
    for conn in conns:
        conn.close()


def rows_with_id(db: PgTestDatabase, row_id: int) -> int:
    row = db.execute("SELECT count(*) AS n FROM proxy_probe WHERE id = %s", [row_id])[0]
    return int(row["n"])  # type: ignore[call-overload]


def server_sees(db: PgTestDatabase, app: str) -> tuple[object, object]:
    """The (state, query) the server reports for the session with this application_name."""
    rows = db.execute("SELECT state, query FROM pg_stat_activity "
                      "WHERE datname = current_database() AND application_name = %s", [app])
    assert len(rows) == 1, rows
    return rows[0]["state"], rows[0]["query"]


def wait_until(check: Callable[[], bool], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not true after {timeout}s"
        time.sleep(0.02)


def test_scanner_cuts_messages_however_the_bytes_arrive() -> None:
    def message(kind: bytes, body: bytes) -> bytes:
        return kind + (len(body) + 4).to_bytes(4, "big") + body

    commit, ready = message(b"C", b"COMMIT\0"), message(b"Z", b"I")
    stream = b"".join([message(b"1", b""), message(b"D", b"\0\1" + b"x" * 70_000), commit,
                       message(b"N", b"notice\0"), message(b"C", b"INSERT 0 1\0"), ready])
    for size in (1, 2, 3, 5, 7, 4096, len(stream)):
        scanner = BackendScanner()
        pieces = [p for i in range(0, len(stream), size) for p in scanner.feed(stream[i:i + size])]
        assert b"".join(data for _, data in pieces) == stream, size
        held = [(chr(kind), data) for kind, data in pieces if kind]
        assert held == [("C", commit), ("C", message(b"C", b"INSERT 0 1\0")), ("Z", ready)], size
    with pytest.raises(ProtocolViolation):
        BackendScanner().feed(b"C\0\0\0\3")


def test_pass_through_keeps_queries_transactions_and_large_values_intact(
        proxy: PgProxy, connect: Connect, probe: PgTestDatabase) -> None:
    big = "".join(chr(0x4E00 + i % 2000) for i in range(700_000))  # ~2 MiB of UTF-8
    conn = connect()
    assert proxy.connections == 1
    rows = conn.execute("SELECT g, md5(g::text) FROM generate_series(1, 50000) g").fetchall()
    assert len(rows) == 50_000 and rows[-1] == (50_000, hashlib.md5(b"50000").hexdigest())
    value = conn.execute("SELECT repeat('ab', %s)", [3 * MiB // 2]).fetchone()
    assert value == ("ab" * (3 * MiB // 2),)
    conn.commit()
    with conn.pipeline():  # many frontend and backend messages per read
        for row_id in range(1, 201):
            conn.execute("INSERT INTO qinglong.proxy_probe (id) VALUES (%s)", [row_id])
    conn.execute("INSERT INTO qinglong.proxy_probe VALUES (0, %s)", [big])
    conn.commit()
    assert conn.execute("SELECT payload FROM qinglong.proxy_probe WHERE id = 0").fetchone() \
        == (big,)
    conn.rollback()
    assert probe.execute("SELECT count(*) AS n, sum(length(payload)) AS c FROM proxy_probe") \
        == [{"n": 201, "c": len(big)}]
    assert set(proxy.fired.values()) == {0}


def test_drop_commit_hides_a_commit_the_server_made(
        proxy: PgProxy, connect: Connect, probe: PgTestDatabase) -> None:
    proxy.arm(ProxyMode.DROP_COMMIT, count=2)
    for row_id in (1, 2):
        conn = connect()
        # Neither a row saying COMMIT nor a ROLLBACK is a COMMIT reply.
        assert conn.execute("SELECT 'COMMIT'").fetchone() == ("COMMIT",)
        conn.rollback()
        conn.execute("INSERT INTO qinglong.proxy_probe (id) VALUES (%s)", [row_id])
        with pytest.raises(psycopg.OperationalError, match="server closed the connection"):
            conn.commit()
        assert conn.closed
        assert rows_with_id(probe, row_id) == 1  # committed although the client never heard
    assert proxy.fired["drop_commit"] == 2
    conn = connect()  # count spent: the mode disarmed itself
    conn.execute("INSERT INTO qinglong.proxy_probe (id) VALUES (3)")
    conn.commit()
    assert proxy.fired["drop_commit"] == 2 and rows_with_id(probe, 3) == 1


def test_close_after_commit_delivers_the_commit_then_closes(
        proxy: PgProxy, connect: Connect, probe: PgTestDatabase) -> None:
    proxy.arm(ProxyMode.CLOSE_AFTER_COMMIT)
    conn = connect()
    conn.execute("INSERT INTO qinglong.proxy_probe (id) VALUES (1)")
    conn.commit()
    assert proxy.fired["close_after_commit"] == 1
    with pytest.raises(psycopg.OperationalError, match="server closed the connection"):
        conn.execute("SELECT 1")
    assert rows_with_id(probe, 1) == 1
    conn = connect()
    conn.execute("INSERT INTO qinglong.proxy_probe (id) VALUES (2)")
    conn.commit()
    assert conn.execute("SELECT 2").fetchone() == (2,)
    assert proxy.fired["close_after_commit"] == 1


def test_blackhole_holds_traffic_until_disarmed(
        proxy: PgProxy, connect: Connect, pg_db: PgTestDatabase) -> None:
    conn = connect("held", autocommit=True)
    # Client to server: the server never sees the query until the disarm.
    proxy.arm(ProxyMode.BLACKHOLE)
    query = Background(lambda: conn.execute("SELECT 42").fetchone()).start()
    wait_until(lambda: proxy.fired["blackhole"] >= 1)  # the query reached the proxy, held
    assert query.running() and proxy.connections == 1
    assert server_sees(pg_db, "held")[1] != "SELECT 42"
    proxy.disarm()
    query.join()
    assert query.error == [] and query.result == [(42,)]
    # Server to client: the server has answered, the client still waits. The query waits on
    # a lock the test holds, so it cannot answer before the proxy is armed.
    holder = pg_db.superuser()
    holder.execute("SELECT pg_advisory_lock(4242)")
    sql = "SELECT 7 FROM pg_advisory_xact_lock(4242)"
    query = Background(lambda: conn.execute(sql).fetchone()).start()  # type: ignore[arg-type]
    wait_until(lambda: server_sees(pg_db, "held") == ("active", sql))
    held_before = proxy.fired["blackhole"]
    proxy.arm(ProxyMode.BLACKHOLE)
    holder.execute("SELECT pg_advisory_unlock(4242)")
    wait_until(lambda: server_sees(pg_db, "held")[0] == "idle")
    wait_until(lambda: proxy.fired["blackhole"] > held_before)  # the answer reached the proxy
    assert query.running()
    proxy.disarm()
    query.join()
    assert query.error == [] and query.result == [(7,)]
    assert conn.execute("SELECT 43").fetchone() == (43,)


def test_delay_slows_every_round_trip(proxy: PgProxy, connect: Connect) -> None:
    conn = connect(autocommit=True)

    def round_trip() -> float:
        start = time.monotonic()
        assert conn.execute("SELECT 1").fetchone() == (1,)
        return time.monotonic() - start

    proxy.set_delay(0.3)
    assert min(round_trip() for _ in range(3)) >= 0.3
    proxy.set_delay(0)
    assert round_trip() < 0.3


def test_sever_all_breaks_live_connections_and_new_ones_work(
        proxy: PgProxy, connect: Connect) -> None:
    conns = [connect(autocommit=True), connect()]
    assert proxy.sever_all() == 2
    for conn in conns:
        with pytest.raises(psycopg.OperationalError, match="server closed the connection"):
            conn.execute("SELECT 1")
    wait_until(lambda: proxy.connections == 0)
    assert connect().execute("SELECT 1").fetchone() == (1,)


def test_application_name_targets_one_replica(
        proxy: PgProxy, connect: Connect, probe: PgTestDatabase) -> None:
    a, b = connect("replica-a-1"), connect("replica-b-1")
    proxy.arm(ProxyMode.DROP_COMMIT, application_name="replica-a")
    b.execute("INSERT INTO qinglong.proxy_probe (id) VALUES (2)")
    b.commit()
    assert proxy.fired["drop_commit"] == 0
    a.execute("INSERT INTO qinglong.proxy_probe (id) VALUES (1)")
    with pytest.raises(psycopg.OperationalError):
        a.commit()
    assert proxy.fired["drop_commit"] == 1
    assert rows_with_id(probe, 1) == 1 and rows_with_id(probe, 2) == 1
    proxy.arm(ProxyMode.BLACKHOLE, application_name="replica-b")
    held = Background(lambda: b.execute("SELECT 'b'").fetchone()).start()
    wait_until(lambda: proxy.fired["blackhole"] >= 1)  # b's query is held ...
    assert connect("replica-c").execute("SELECT 'c'").fetchone() == ("c",)
    assert held.running()
    proxy.disarm()
    held.join()
    assert held.result == [("b",)]


def test_stop_is_bounded_and_idempotent(proxy: PgProxy, connect: Connect) -> None:
    PgProxy("127.0.0.1", 1).stop()  # never started: nothing to do
    conn = connect(autocommit=True)
    proxy.arm(ProxyMode.BLACKHOLE)
    held = Background(lambda: conn.execute("SELECT 1").fetchone()).start()
    wait_until(lambda: proxy.fired["blackhole"] >= 1)  # the query sits in the proxy
    start = time.monotonic()
    proxy.stop()
    assert time.monotonic() - start < 2.0
    held.join()
    assert len(held.error) == 1 and isinstance(held.error[0], psycopg.OperationalError)
    start = time.monotonic()
    proxy.stop()
    assert time.monotonic() - start < 0.1
    with pytest.raises(psycopg.OperationalError, match="refused"):
        connect()


def test_default_sslmode_is_answered_by_the_proxy(
        proxy: PgProxy, connect: Connect, pg_db: PgTestDatabase) -> None:
    url = proxy.route(pg_db.url("ql_runtime"), connect_timeout=5)
    assert "sslmode" not in url and "gssencmode" not in url  # libpq asks for SSL by default
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert not conn.pgconn.ssl_in_use
    assert proxy.fired["encryption_refused"] >= 1
    with pytest.raises(psycopg.OperationalError, match="SSL"):
        connect(sslmode="require")
