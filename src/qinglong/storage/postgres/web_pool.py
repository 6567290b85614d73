"""The connection pool of `ql web`.

``PoolConnector`` sets sessions up for the claim path (generic plans, sequential scans off:
see ``prepare_session``); under those settings the API's ad hoc reads cost 10^10 and
PostgreSQL JIT-compiles them (half a second for a page of Runs). The API's sessions get the
timeouts (and no JIT); a transaction that needs index scans (run now) sets that itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from qinglong.errors import ConnectionLost
from qinglong.storage.postgres.connection import PgConnection, connect, conninfo, prepare_session


class WebPool:
    """A Connector for `ql web`: up to ``max_size`` connections, each with the API's
    timeouts."""

    def __init__(self, url: str, *, application_name: str, max_size: int = 8,
                 statement_timeout_ms: int = 15_000, lock_timeout_ms: int = 2_000,
                 idle_in_transaction_timeout_ms: int = 10_000, timeout_s: float = 5.0) -> None:
        self._url = url
        self._application_name = application_name
        self._timeouts = {"st": f"{statement_timeout_ms}ms", "lt": f"{lock_timeout_ms}ms",
                          "it": f"{idle_in_transaction_timeout_ms}ms"}
        self._pool = ConnectionPool(
            conninfo(url, application_name=application_name), min_size=1, max_size=max_size,
            kwargs={"autocommit": True, "row_factory": dict_row}, configure=self._configure,
            check=ConnectionPool.check_connection, timeout=timeout_s, open=False,
            name=application_name)

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        prepare_session(conn, None)  # notices only
        conn.execute("SELECT set_config('statement_timeout', %(st)s, false), "
                     "set_config('lock_timeout', %(lt)s, false), "
                     "set_config('idle_in_transaction_session_timeout', %(it)s, false), "
                     # short answers: compiling a plan would cost more than running it
                     "set_config('jit', 'off', false)",
                     self._timeouts)

    def open(self, wait_s: float = 10.0) -> None:
        # one connection first: a refusal then says why (the pool would only time out)
        connect(self._url, application_name=self._application_name).close()
        self._pool.open(wait=False)
        try:
            self._pool.wait(timeout=wait_s)
        except PoolTimeout as exc:
            self._pool.close(timeout=1.0)
            raise ConnectionLost("cannot connect to PostgreSQL (the pool did not fill in "
                                 "time)") from exc

    @contextlib.contextmanager
    def connection(self) -> Iterator[PgConnection]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise ConnectionLost("no database connection available") from exc

    def close(self) -> None:
        self._pool.close(timeout=5.0)
