"""The one LISTEN connection of a process: every wake-up other processes send with NOTIFY
(storage/wakeups.py) reaches this process's subscribers through it.

One daemon thread connects, LISTENs on every topic's channel, tells every subscriber once
(whatever was sent while nobody listened), then passes each notification on until stopped.
While it is not connected, ``Wakeups.reliable`` is false and the loops poll at their
interval: a lost wake-up costs a poll, never work.
"""

from __future__ import annotations

import threading
from typing import LiteralString

import psycopg

from qinglong.storage.kernel import Wake
from qinglong.storage.postgres.connection import conninfo
from qinglong.storage.postgres.driver import CHANNEL_PREFIX
from qinglong.storage.wakeups import TOPICS, Wakeups

# The statement per topic, channel qinglong_<topic> (storage/postgres/driver.py, CHANNEL_PREFIX).
LISTEN: dict[str, LiteralString] = {"schedules": "LISTEN qinglong_schedules",
                                    "runs": "LISTEN qinglong_runs",
                                    "cancel": "LISTEN qinglong_cancel"}
POLL_S = 1.0  # how often the thread looks at the stop flag while nothing arrives
RETRY_S = 1.0  # the wait before connecting again after the database went away


class Listener:
    """LISTENs on ``topics`` (every topic unless told) for ``wakeups``."""

    def __init__(self, url: str, application_name: str, wakeups: Wakeups,
                 topics: tuple[str, ...] = TOPICS) -> None:
        self._url = url
        self._application_name = application_name
        self._wakeups = wakeups
        self._topics = topics
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ql-listen", daemon=True)

    @property
    def listening(self) -> bool:
        return self._wakeups.reliable

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Never waits long: a thread stuck connecting to a database that is away ends on its
        own (it is a daemon and looks at the stop flag before each attempt)."""
        self._stop.set()
        self._thread.join(1.5)

    def _loop(self) -> None:
        channels = {CHANNEL_PREFIX + topic: topic for topic in self._topics}
        while not self._stop.is_set():
            try:
                with psycopg.connect(conninfo(self._url, application_name=self._application_name),
                                     autocommit=True) as conn:
                    for topic in self._topics:  # in order: the last LISTEN is the last statement
                        conn.execute(LISTEN[topic])
                    self._wakeups.set_reliable(True)
                    # anything sent before the LISTENs took effect
                    self._wakeups.publish([Wake(topic) for topic in self._topics])
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=POLL_S):
                            heard = channels.get(note.channel)
                            if heard is not None:
                                self._wakeups.received += 1
                                self._wakeups.publish([Wake(heard, note.payload)])
            except psycopg.Error:
                pass  # the database is away: the loops poll at their interval meanwhile
            finally:
                self._wakeups.set_reliable(False)
            self._stop.wait(RETRY_S)
