"""How much password hashing one process does at once.

An argon2id verification with argon2-cffi's default parameters takes 64 MiB and tens of
milliseconds of a core. ``ql serve`` runs the scheduler, the executor and the API in one
process, so a flood of logins must not be able to take its memory or its cores: a ``HashGate``
lets ``slots`` hashes run at once and ``queue`` more wait their turn; anyone beyond that is
refused at once (429, retry after a second) instead of waiting in an unbounded line.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from qinglong.errors import RateLimited

BUSY_RETRY_S = 1
DEFAULT_SLOTS = 2
DEFAULT_QUEUE = 8


class HashGate:
    """At most ``slots`` password hashes at once, at most ``queue`` callers waiting."""

    def __init__(self, slots: int = DEFAULT_SLOTS, queue: int = DEFAULT_QUEUE) -> None:
        if slots < 1 or queue < 0:
            raise ValueError("a hash gate needs at least one slot and a queue of 0 or more")
        self._slots = slots
        self._queue = queue
        self._changed = threading.Condition()
        self._busy = 0
        self._waiting = 0

    @property
    def busy(self) -> int:
        """Hashes running now."""
        with self._changed:
            return self._busy

    @property
    def waiting(self) -> int:
        """Callers waiting for a slot now."""
        with self._changed:
            return self._waiting

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one slot for the body; raise RateLimited when the slots and the queue are full."""
        with self._changed:
            if self._busy >= self._slots:
                if self._waiting >= self._queue:
                    raise RateLimited("the server is checking too many passwords right now; "
                                      f"try again in {BUSY_RETRY_S} s", BUSY_RETRY_S)
                self._waiting += 1
                try:
                    while self._busy >= self._slots:
                        self._changed.wait()
                finally:
                    self._waiting -= 1
            self._busy += 1
        try:
            yield
        finally:
            with self._changed:
                self._busy -= 1
                self._changed.notify()


# One per process: every Accounts of a process shares it unless given its own.
PROCESS_GATE = HashGate()
