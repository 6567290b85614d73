"""Wake-ups on publish: a `ql control` replica LISTENs on ``qinglong_schedules`` on a
connection of its own and wakes its scheduler loop when a definition transaction commits.

This is only a hint. The scheduler still reads the next due instant after every cycle that
was not saturated and sleeps until then; LISTEN only lets that sleep be long (``idle cap``)
without a new trigger waiting for it. While the connection is down, or before its first
LISTEN succeeded, ``idle_cap_s`` answers None and the loop falls back to its interval: a lost
notification costs at most one idle cap, never an occurrence.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg

from qinglong.storage.postgres.connection import conninfo

CHANNEL = "qinglong_schedules"
IDLE_CAP_S = 5.0  # the longest a listening replica sleeps: also bounds its heartbeat gap
RETRY_S = 1.0


class ScheduleWakeups:
    """One daemon thread: connect, LISTEN, wake the loop once (anything published while it
    was not listening), then wake it for every notification until stopped."""

    def __init__(self, url: str, application_name: str, wake: Callable[[], None],
                 idle_cap_s: float = IDLE_CAP_S) -> None:
        self._url = url
        self._application_name = application_name
        self._wake = wake
        self._cap = idle_cap_s
        self._listening = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ql-wakeups", daemon=True)
        self.notifications = 0

    @property
    def listening(self) -> bool:
        return self._listening.is_set()

    def idle_cap_s(self) -> float | None:
        """The loop's longest sleep while notifications are reliable, else None."""
        return self._cap if self._listening.is_set() else None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Never waits long: a thread stuck connecting to a database that is away ends on
        its own (it is a daemon and checks the stop flag before each attempt)."""
        self._stop.set()
        self._thread.join(1.5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(conninfo(self._url, application_name=self._application_name),
                                     autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._listening.set()
                    self._wake()  # anything published before the LISTEN took effect
                    while not self._stop.is_set():
                        for _note in conn.notifies(timeout=1.0):
                            self.notifications += 1
                            self._wake()
            except psycopg.Error:
                pass  # the database is away: the loop polls at its interval meanwhile
            finally:
                self._listening.clear()
            self._stop.wait(RETRY_S)
