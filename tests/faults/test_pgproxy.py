"""The fault-injecting PostgreSQL proxy, against real servers: each mode really happens.

Every connection has a short connect_timeout and every wait is bounded, so a proxy that
holds traffic it should pass fails a test instead of hanging it.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import psycopg
import pytest

from qinglong.testing.pgproxy import BackendScanner, PgProxy, ProtocolViolation, ProxyMode
from tests.support.pg import PgTestDatabase

WAIT = 5.0  # seconds any single wait may take before the test fails
MiB = 1024 * 1024


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


@pytest.fixture
def probe(pg_db: PgTestDatabase) -> PgTestDatabase:
    """A table the runtime role may write, checked directly (not through the proxy)."""
    pg_db.execute("CREATE TABLE proxy_probe (id integer PRIMARY KEY, payload text NOT NULL DEFAULT '')")
    pg_db.execute("GRANT SELECT, INSERT ON proxy_probe TO ql_runtime")
    return pg_db


@pytest.fixture
def proxy(pg_db: PgTestDatabase) -> Iterator[PgProxy]:
    proxy = PgProxy(pg_db.server.host, pg_db.server.port).start()
    try:
        yield proxy
    finally:
        proxy.stop()


def connect(proxy: PgProxy, db: PgTestDatabase, app: str = "pgproxy-test",
            autocommit: bool = False) -> psycopg.Connection[tuple[object, ...]]:
    url = proxy.route(db.url("ql_runtime"), application_name=app, connect_timeout=5,
                      sslmode="disable", gssencmode="disable")
    return psycopg.connect(url, autocommit=autocommit)


def rows_with_id(db: PgTestDatabase, row_id: int) -> int:
    return int(db.execute("SELECT count(*) AS n FROM proxy_probe WHERE id = %s",  # type: ignore[call-overload]
                          [row_id])[0]["n"])


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
        proxy: PgProxy, probe: PgTestDatabase) -> None:
    big = "".join(chr(0x4E00 + i % 2000) for i in range(700_000))  # ~2 MiB of UTF-8
    with connect(proxy, probe) as conn:
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


def test_drop_commit_hides_a_commit_the_server_made(proxy: PgProxy, probe: PgTestDatabase) -> None:
    proxy.arm(ProxyMode.DROP_COMMIT, count=2)
    for row_id in (1, 2):
        conn = connect(proxy, probe)
        try:
            # Neither a row saying COMMIT nor a ROLLBACK is a COMMIT reply.
            assert conn.execute("SELECT 'COMMIT'").fetchone() == ("COMMIT",)
            conn.rollback()
            conn.execute("INSERT INTO qinglong.proxy_probe (id) VALUES (%s)", [row_id])
            with pytest.raises(psycopg.OperationalError, match="server closed the connection"):
                conn.commit()
            assert conn.closed
        finally:
            conn.close()
        assert rows_with_id(probe, row_id) == 1  # committed although the client never heard
    assert proxy.fired["drop_commit"] == 2
    with connect(proxy, probe) as conn:  # count spent: the mode disarmed itself
        conn.execute("INSERT INTO qinglong.proxy_probe (id) VALUES (3)")
        conn.commit()
    assert proxy.fired["drop_commit"] == 2 and rows_with_id(probe, 3) == 1


def test_close_after_commit_delivers_the_commit_then_closes(
        proxy: PgProxy, probe: PgTestDatabase) -> None:
    proxy.arm(ProxyMode.CLOSE_AFTER_COMMIT)
    with connect(proxy, probe) as conn:
        conn.execute("INSERT INTO qinglong.proxy_probe (id) VALUES (1)")
        conn.commit()
        assert proxy.fired["close_after_commit"] == 1
        with pytest.raises(psycopg.OperationalError, match="server closed the connection"):
            conn.execute("SELECT 1")
    assert rows_with_id(probe, 1) == 1
    with connect(proxy, probe) as conn:
        conn.execute("INSERT INTO qinglong.proxy_probe (id) VALUES (2)")
        conn.commit()
        assert conn.execute("SELECT 2").fetchone() == (2,)
    assert proxy.fired["close_after_commit"] == 1


def test_blackhole_holds_traffic_until_disarmed(proxy: PgProxy, pg_db: PgTestDatabase) -> None:
    with connect(proxy, pg_db, autocommit=True) as conn:
        proxy.arm(ProxyMode.BLACKHOLE)
        query = Background(lambda: conn.execute("SELECT 42").fetchone()).start()
        time.sleep(0.5)
        assert query.running() and proxy.connections == 1
        assert proxy.fired["blackhole"] >= 1
        proxy.disarm()
        query.join()
        assert query.error == [] and query.result == [(42,)]
        assert conn.execute("SELECT 43").fetchone() == (43,)


def test_delay_slows_every_round_trip(proxy: PgProxy, pg_db: PgTestDatabase) -> None:
    def round_trip(conn: psycopg.Connection[tuple[object, ...]]) -> float:
        start = time.monotonic()
        assert conn.execute("SELECT 1").fetchone() == (1,)
        return time.monotonic() - start

    with connect(proxy, pg_db, autocommit=True) as conn:
        proxy.set_delay(0.3)
        assert min(round_trip(conn) for _ in range(3)) >= 0.3
        proxy.set_delay(0)
        assert round_trip(conn) < 0.3


def test_sever_all_breaks_live_connections_and_new_ones_work(
        proxy: PgProxy, pg_db: PgTestDatabase) -> None:
    conns = [connect(proxy, pg_db, autocommit=True) for _ in range(2)]
    try:
        assert proxy.sever_all() == 2
        for conn in conns:
            with pytest.raises(psycopg.OperationalError):
                conn.execute("SELECT 1")
        wait_until(lambda: proxy.connections == 0)
    finally:
        for conn in conns:
            conn.close()
    with connect(proxy, pg_db) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_application_name_targets_one_replica(proxy: PgProxy, probe: PgTestDatabase) -> None:
    with connect(proxy, probe, app="replica-a-1") as a, connect(proxy, probe, app="replica-b-1") as b:
        proxy.arm(ProxyMode.DROP_COMMIT, application_name="replica-a")
        b.execute("INSERT INTO qinglong.proxy_probe (id) VALUES (2)")
        b.commit()
        assert proxy.fired["drop_commit"] == 0
        a.execute("INSERT INTO qinglong.proxy_probe (id) VALUES (1)")
        with pytest.raises(psycopg.OperationalError):
            a.commit()
        assert proxy.fired["drop_commit"] == 1
        proxy.arm(ProxyMode.BLACKHOLE, application_name="replica-b")
        held = Background(lambda: b.execute("SELECT 'b'").fetchone()).start()
        with connect(proxy, probe, app="replica-c") as c:
            assert c.execute("SELECT 'c'").fetchone() == ("c",)
        assert held.running()
        proxy.disarm()
        held.join()
        assert held.result == [("b",)]
    assert rows_with_id(probe, 1) == 1 and rows_with_id(probe, 2) == 1


def test_stop_is_bounded_and_idempotent(pg_db: PgTestDatabase) -> None:
    PgProxy(pg_db.server.host, pg_db.server.port).stop()  # never started: nothing to do
    proxy = PgProxy(pg_db.server.host, pg_db.server.port).start()
    conn = connect(proxy, pg_db, autocommit=True)
    try:
        proxy.arm(ProxyMode.BLACKHOLE)
        held = Background(lambda: conn.execute("SELECT 1").fetchone()).start()
        time.sleep(0.2)
        start = time.monotonic()
        proxy.stop()
        assert time.monotonic() - start < 2.0
        held.join()
        assert len(held.error) == 1 and isinstance(held.error[0], psycopg.OperationalError)
        start = time.monotonic()
        proxy.stop()
        assert time.monotonic() - start < 0.1
        with pytest.raises(psycopg.OperationalError, match="refused"):
            connect(proxy, pg_db)
    finally:
        conn.close()


def test_default_sslmode_is_answered_by_the_proxy(proxy: PgProxy, pg_db: PgTestDatabase) -> None:
    url = proxy.route(pg_db.url("ql_runtime"), connect_timeout=5)
    assert "sslmode" not in url
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert not conn.pgconn.ssl_in_use
    assert proxy.fired["encryption_refused"] >= 1
    with pytest.raises(psycopg.OperationalError, match="SSL"):
        psycopg.connect(proxy.route(pg_db.url("ql_runtime"), connect_timeout=5, sslmode="require"))
