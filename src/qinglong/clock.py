"""The clock seam: the only module that reads the node's time.

The cluster scheduler takes no Clock at all; PostgreSQL's clock is its only time
authority. The SQLite profiles, cadence timers and drain deadlines use a Clock.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock time as UTC epoch milliseconds."""
        ...

    def monotonic(self) -> float:
        """Seconds on a monotonic clock, for durations only."""
        ...


class SystemClock:
    """The node's real clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


def pause(seconds: float) -> None:
    """Wait ``seconds`` on the monotonic clock, interruptible by nothing.

    Implemented with ``threading.Event.wait`` rather than ``time.sleep``: libfaketime (used
    to test replicas with skewed wall clocks) breaks ``time.sleep`` when the monotonic clock
    is excluded from faking, while condition waits keep working.
    """
    if seconds > 0:
        threading.Event().wait(seconds)
