"""Client-side deadlines of a process's database calls, kept by one thread.

A block under a deadline (a COMMIT, a bounded read) registers when it must end and what to
do then (cut its connection's socket); ending the block in time cancels that. One thread
per process watches every deadline, so a transaction costs a heap push, not the start of a
timer thread of its own (which had cost about a sixth of a millisecond of CPU per commit).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from qinglong.clock import Clock, SystemClock


@dataclass(eq=False, slots=True)
class Deadline:
    action: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass(eq=False)
class DeadlineWatch:
    clock: Clock = field(default_factory=SystemClock)
    _heap: list[tuple[float, int, Deadline]] = field(default_factory=list, init=False)
    _order: itertools.count[int] = field(default_factory=itertools.count, init=False)
    _changed: threading.Condition = field(default_factory=threading.Condition, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def after(self, seconds: float, action: Callable[[], None]) -> Deadline:
        """Run ``action`` (on the watch's thread) ``seconds`` from now unless cancelled."""
        deadline = Deadline(action)
        due = self.clock.monotonic() + seconds
        with self._changed:
            heapq.heappush(self._heap, (due, next(self._order), deadline))
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="ql-deadlines",
                                                daemon=True)
                self._thread.start()
            elif self._heap[0][2] is deadline:  # sooner than whatever the watch waits for
                self._changed.notify()
        return deadline

    def _watch(self) -> None:
        while True:
            with self._changed:
                while True:
                    while self._heap and self._heap[0][2].cancelled:
                        heapq.heappop(self._heap)
                    if not self._heap:
                        self._changed.wait()
                        continue
                    due = self._heap[0][0]
                    left = due - self.clock.monotonic()
                    if left <= 0:
                        deadline = heapq.heappop(self._heap)[2]
                        break
                    self._changed.wait(left)
            if not deadline.cancelled:
                deadline.action()


WATCH = DeadlineWatch()  # the process's one watch
