"""A settable clock for tests: time moves only when the test moves it."""

from __future__ import annotations

import threading


class FakeClock:
    def __init__(self, now_ms: int = 1_800_000_000_000) -> None:
        self._now_ms = now_ms
        self._monotonic = 1000.0
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now_ms

    def monotonic(self) -> float:
        with self._lock:
            return self._monotonic

    def set(self, now_ms: int) -> None:
        with self._lock:
            self._monotonic += max(0, now_ms - self._now_ms) / 1000
            self._now_ms = now_ms

    def advance(self, ms: int) -> None:
        with self._lock:
            self._now_ms += ms
            self._monotonic += ms / 1000
