"""`NOTIFY qinglong_runs` after admissions: a hint to the workers, never needed for
correctness."""

from __future__ import annotations

import contextlib
import threading

import psycopg

from qinglong.errors import QinglongError
from qinglong.storage.postgres.connection import QUERIES, PoolConnector


class Notifier:
    """Tells the workers that Runs were queued (``NOTIFY qinglong_runs``), outside any
    admission transaction and at most every 100 ms however many were admitted: a hint that
    saves them a poll interval, never needed for correctness."""

    MIN_GAP_S = 0.1

    def __init__(self, connector: PoolConnector) -> None:
        self._connector = connector
        self._pending = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ql-notify", daemon=True)
        self.sent = 0

    def start(self) -> None:
        self._thread.start()

    def poke(self) -> None:
        self._pending.set()

    def stop(self) -> None:
        self._stop.set()
        self._pending.set()
        self._thread.join(5.0)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._pending.wait()
            if self._stop.is_set():
                return
            self._pending.clear()
            with contextlib.suppress(QinglongError, psycopg.Error):
                with self._connector.connection() as conn:
                    conn.execute(QUERIES["notify_runs"])
                self.sent += 1
            self._stop.wait(self.MIN_GAP_S)
