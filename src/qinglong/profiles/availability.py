"""A `ql control` replica's availability: starting, ready, unavailable or stopping, and the
fence that turns ready into unavailable once per activation (only a new activation is ready
again)."""

from __future__ import annotations

import threading
from enum import StrEnum
from typing import Protocol


class Availability(StrEnum):
    STARTING = "starting"
    READY = "ready"
    UNAVAILABLE = "unavailable"
    STOPPING = "stopping"


class StateObserver(Protocol):
    def state(self, state: Availability, reason: str) -> None: ...


class AvailabilityFence:
    """ready -> unavailable happens once per activation; only a new activation is ready again."""

    def __init__(self, observer: StateObserver) -> None:
        self._lock = threading.Lock()
        self._state = Availability.STARTING
        self._reason = "starting"
        self._tripped = threading.Event()
        self._observer = observer

    @property
    def state(self) -> tuple[Availability, str]:
        with self._lock:
            return self._state, self._reason

    def _set(self, state: Availability, reason: str) -> None:
        with self._lock:
            if self._state is Availability.STOPPING or (state, reason) == (self._state, self._reason):
                return
            self._state, self._reason = state, reason
        self._observer.state(state, reason)

    def activated(self) -> None:
        self._tripped.clear()
        self._set(Availability.READY, "activated")

    def trip(self, reason: str) -> None:
        with self._lock:
            already = self._state is not Availability.READY
        self._tripped.set()
        if not already:
            self._set(Availability.UNAVAILABLE, reason)

    def not_ready(self, reason: str) -> None:
        self._set(Availability.UNAVAILABLE, reason)

    def stopping(self) -> None:
        self._set(Availability.STOPPING, "stopping")
        self._tripped.set()

    def wait_tripped(self, timeout_s: float | None) -> bool:
        return self._tripped.wait(timeout_s)

    @property
    def ready(self) -> bool:
        with self._lock:
            return self._state is Availability.READY
