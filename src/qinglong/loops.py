"""Paced loops: the one start/stop base of every background service (the scheduler, the
reconciler), running cycles on one thread, never overlapping, and draining on stop.

The next cycle starts after the previous one ends: at once when it was saturated (it used
its whole budget), otherwise after ``min(interval, next due)``. A loop that is woken whenever
new work appears (``wake``, e.g. from a LISTEN connection) may be given a longer ``idle cap``
to use instead of the interval while those wake-ups are reliable: it then sleeps until the
next due instant, at most that long. Errors and reports go to a diagnostics sink that can
never stop the loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from enum import StrEnum
from typing import Generic, Protocol, TypeVar

from qinglong.diagnostics import DiagnosticSink, diagnostic_from, emit
from qinglong.errors import InvalidConfig

_log = logging.getLogger(__name__)

MIN_INTERVAL_S = 0.25
MAX_INTERVAL_S = 3600.0
MIN_STOP_TIMEOUT_S = 0.1
MAX_STOP_TIMEOUT_S = 30.0
WAKE_SLACK_S = 0.002


class StopResult(StrEnum):
    STOPPED = "stopped"
    TIMED_OUT = "timed_out"


def check_interval(seconds: float) -> float:
    if not MIN_INTERVAL_S <= seconds <= MAX_INTERVAL_S:
        raise InvalidConfig("interval", f"must be between {MIN_INTERVAL_S} s and {MAX_INTERVAL_S} s")
    return seconds


class Paced(Protocol):
    """What a cycle reports back: whether it used its whole budget, and when next to look."""

    @property
    def saturated(self) -> bool: ...

    @property
    def next_due_in_ms(self) -> int | None: ...


Report = TypeVar("Report", bound=Paced)


class PacedLoop(Generic[Report]):
    """Owns one background thread. ``start`` and ``stop`` are idempotent."""

    def __init__(
        self,
        cycle: Callable[[], Report],
        *,
        interval_s: float = 1.0,
        stop_timeout_s: float = 10.0,
        diagnostics: DiagnosticSink | None = None,
        on_report: Callable[[Report], None] | None = None,
        name: str = "ql-scheduler",
        idle_cap_s: Callable[[], float | None] | None = None,
    ) -> None:
        if not MIN_STOP_TIMEOUT_S <= stop_timeout_s <= MAX_STOP_TIMEOUT_S:
            raise InvalidConfig(
                "stop-timeout", f"must be between {MIN_STOP_TIMEOUT_S} s and {MAX_STOP_TIMEOUT_S} s"
            )
        self._cycle = cycle
        self._interval_s = check_interval(interval_s)
        self._stop_timeout_s = stop_timeout_s
        self._diagnostics = diagnostics
        self._on_report = on_report
        self._name = name
        self._idle_cap_s = idle_cap_s
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._cycle_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop_result: StopResult | None = None
        self._state_lock = threading.Lock()
        self.cycles = 0
        self.last_report: Report | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        with self._state_lock:
            if self._thread is not None or self._stopping.is_set():
                return
            self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
            self._thread.start()

    def wake(self) -> None:
        """Run the next cycle now instead of waiting for the cadence."""
        self._wake.set()

    def stop_requested(self) -> bool:
        """True once ``stop`` was called: a cycle checks it between claims to end early."""
        return self._stopping.is_set()

    def run_once(self) -> Report:
        """Run one cycle on the caller's thread (never concurrently with another)."""
        if self._stopping.is_set():
            raise RuntimeError("the scheduler lifecycle is stopping")
        with self._cycle_lock:
            return self._cycle()

    def stop(self) -> StopResult:
        """Stop cadence, wait for the in-flight cycle up to the stop timeout."""
        with self._state_lock:
            if self._stop_result is not None:
                return self._stop_result
            self._stopping.set()
            self._wake.set()
            thread = self._thread
        if thread is not None:
            thread.join(self._stop_timeout_s)
        result = StopResult.TIMED_OUT if thread is not None and thread.is_alive() else StopResult.STOPPED
        with self._state_lock:
            self._stop_result = result
        return result

    def _loop(self) -> None:
        while not self._stopping.is_set():
            delay = self._interval_s
            try:
                with self._cycle_lock:
                    if self._stopping.is_set():
                        break
                    report = self._cycle()
                self.cycles += 1
                self.last_report = report
                delay = self._next_delay(report)
                if self._on_report is not None and not self._stopping.is_set():
                    self._on_report(report)
            except Exception as exc:  # noqa: BLE001 - isolation boundary
                if not self._stopping.is_set():
                    emit(self._diagnostics, diagnostic_from("scheduler", exc))
            if delay > 0:
                self._wake.wait(delay)
            self._wake.clear()

    def _next_delay(self, report: Report) -> float:
        if report.saturated:
            return 0.0
        cap = self.longest_pause_s()
        if report.next_due_in_ms is None:
            return cap
        return min(cap, report.next_due_in_ms / 1000 + WAKE_SLACK_S)

    def longest_pause_s(self) -> float:
        """The longest sleep: the interval, or the idle cap while wake-ups are reliable (the
        callable returns None when they are not, e.g. while the LISTEN connection is down)."""
        if self._idle_cap_s is None:
            return self._interval_s
        cap = self._idle_cap_s()
        return self._interval_s if cap is None else max(self._interval_s, cap)
