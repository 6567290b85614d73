"""The pool lends an idle connection without a round trip while its socket is quiet, and one
whose server session ended (terminated, as by a restart) is checked, dropped and replaced
before anything runs on it, with the loss reported: on both PostgreSQL servers."""

from __future__ import annotations

import time
from typing import Any

from qinglong.storage.postgres.connection import PoolConnector, SessionSettings, socket_quiet
from tests.support.pg import PgTestDatabase

SETTINGS = SessionSettings(statement_timeout_ms=5_000, lock_timeout_ms=1_000,
                           idle_in_transaction_timeout_ms=10_000, transaction_timeout_ms=20_000)


def backend_pid(conn: Any) -> int:
    return int(conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"])


def last_statement(db: PgTestDatabase, pid: int) -> str:
    [row] = db.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid])
    return str(row["query"])


def wait_until_loud(conn: Any) -> None:
    """Wait for the terminated session's goodbye to reach the client's socket."""
    deadline = time.monotonic() + 10
    while socket_quiet(conn):
        assert time.monotonic() < deadline, "the ended session's socket never turned readable"
        time.sleep(0.01)


def test_a_quiet_connection_is_lent_as_is_and_an_ended_one_is_replaced(
        pg_db: PgTestDatabase) -> None:
    lost: list[int] = []
    pool = PoolConnector(pg_db.url("ql_runtime"), application_name="ql-pool-test",
                         settings=SETTINGS, min_size=1, max_size=1,
                         on_lost=lambda: lost.append(1))
    pool.open()
    try:
        with pool.connection() as conn:
            first = backend_pid(conn)
            held = conn
        assert socket_quiet(held)
        # lent again with no round trip: the session's last statement is still the one above
        with pool.connection() as conn:
            assert conn is held
            assert last_statement(pg_db, first) == "SELECT pg_backend_pid() AS pid"
        assert lost == []
        pg_db.execute("SELECT pg_terminate_backend(%s)", [first])
        wait_until_loud(held)
        with pool.connection() as conn:  # the check saw the end: a new session is lent
            assert backend_pid(conn) != first
            assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
        assert lost == [1]
    finally:
        pool.close()


def test_a_message_waiting_or_a_closed_connection_is_not_quiet(
        pg_db: PgTestDatabase) -> None:
    import psycopg

    with psycopg.connect(pg_db.url("ql_runtime"), autocommit=True) as other:
        conn = psycopg.connect(pg_db.url("ql_runtime"), autocommit=True)
        conn.execute("LISTEN qinglong_pool_test")
        assert socket_quiet(conn)
        other.execute("NOTIFY qinglong_pool_test")  # the listener's socket has a message
        wait_until_loud(conn)
        assert not socket_quiet(conn)
        conn.close()
        assert not socket_quiet(conn)
