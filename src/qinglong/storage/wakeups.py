"""The one notifier of a process: wake-ups by topic.

A transaction that changes something another loop waits for says so with ``Tx.wake(topic)``;
once it commits, the driver publishes the wake-up here for this process's subscribers, and
(PostgreSQL) sends it with NOTIFY to every other process, whose one LISTEN connection
publishes it into their own ``Wakeups`` (storage/postgres/listener.py).

Wake-ups are hints: every loop still polls, so a lost one costs a poll interval, never
work. ``reliable`` says whether wake-ups from other processes arrive (the listener is
connected); a loop may sleep longer only while it does.

Topics:

- ``schedules``: definitions changed (publish, delete, pause, resume, archive): the
  scheduler looks at once.
- ``runs``: Runs were queued: executors and workers look for work.
- ``cancel``: a Run was asked to stop (payload: its id; empty after a reconnect: look at
  every Run in hand at the next renewal).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from qinglong.storage.kernel import Wake

TOPICS = ("schedules", "runs", "cancel")
Subscriber = Callable[[str], None]  # called with the payload


class Wakeups:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: dict[str, list[Subscriber]] = {topic: [] for topic in TOPICS}
        self._reliable = threading.Event()
        self.received = 0  # wake-ups that came from other processes

    def subscribe(self, topic: str, subscriber: Subscriber) -> Callable[[], None]:
        """Call ``subscriber`` for every wake-up of ``topic``; returns the unsubscribe."""
        with self._lock:
            self._subscribers[topic].append(subscriber)

        def unsubscribe() -> None:
            with self._lock:
                if subscriber in self._subscribers[topic]:
                    self._subscribers[topic].remove(subscriber)

        return unsubscribe

    def publish(self, wakes: Sequence[Wake]) -> None:
        for wake in wakes:
            with self._lock:
                subscribers = tuple(self._subscribers.get(wake.topic, ()))
            for subscriber in subscribers:
                subscriber(wake.payload)

    @property
    def reliable(self) -> bool:
        return self._reliable.is_set()

    def set_reliable(self, reliable: bool) -> None:
        if reliable:
            self._reliable.set()
        else:
            self._reliable.clear()
