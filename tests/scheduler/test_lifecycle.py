"""PacedLoop: no overlap, saturation, bounded drain, isolated diagnostics.

These tests synchronise on events instead of sleeping; the only waits are bounded
timeouts that fail the test when something hangs.
"""

from __future__ import annotations

import threading

import pytest

from qinglong.diagnostics import Diagnostic
from qinglong.errors import InvalidConfig, StorageError
from qinglong.loops import PacedLoop, StopResult
from qinglong.scheduler.report import CycleReport

WAIT = 5.0


class Recorder:
    """A cycle that records concurrency and can be told what to return or raise."""

    def __init__(self, *, saturated_for: int = 0, fail_every: int = 0, block: threading.Event | None = None):
        self.calls = 0
        self.active = 0
        self.max_active = 0
        self.lock = threading.Lock()
        self.saturated_for = saturated_for
        self.fail_every = fail_every
        self.block = block
        self.entered = threading.Event()
        self.reached = {n: threading.Event() for n in range(1, 50)}

    def __call__(self) -> CycleReport:
        with self.lock:
            self.calls += 1
            call = self.calls
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        self.entered.set()
        try:
            if self.block is not None:
                self.block.wait(WAIT)
            if self.fail_every and call % self.fail_every == 0:
                raise StorageError("injected")
            return CycleReport(claimed=1, saturated=call <= self.saturated_for, next_due_in_ms=None)
        finally:
            with self.lock:
                self.active -= 1
            if call in self.reached:
                self.reached[call].set()


def test_saturated_cycles_follow_each_other_at_once() -> None:
    cycle = Recorder(saturated_for=5)
    life = PacedLoop(cycle, interval_s=3600)
    life.start()
    try:
        # With a one-hour cadence, six cycles can only happen if saturation skips the wait.
        assert cycle.reached[6].wait(WAIT)
        assert not cycle.reached[7].wait(0.3)
    finally:
        assert life.stop() is StopResult.STOPPED


def test_cycles_never_overlap_even_with_run_once_from_other_threads() -> None:
    cycle = Recorder(saturated_for=40)
    life = PacedLoop(cycle, interval_s=0.25)
    life.start()
    threads = [threading.Thread(target=lambda: [life.run_once() for _ in range(5)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert life.stop() is StopResult.STOPPED
    assert cycle.max_active == 1
    assert cycle.calls >= 20


def test_stop_drains_an_in_flight_cycle_within_the_bound() -> None:
    release = threading.Event()
    cycle = Recorder(block=release)
    life = PacedLoop(cycle, interval_s=1.0, stop_timeout_s=0.2)
    life.start()
    assert cycle.entered.wait(WAIT)
    assert life.stop() is StopResult.TIMED_OUT  # the cycle is still blocked
    release.set()
    assert life.stop() is StopResult.TIMED_OUT  # stop is idempotent: same answer
    assert cycle.reached[1].wait(WAIT)
    assert cycle.calls == 1  # no new cycle after stop began
    with pytest.raises(RuntimeError):
        life.run_once()


def test_stop_waits_for_a_cycle_that_finishes_in_time() -> None:
    release = threading.Event()
    cycle = Recorder(block=release)
    life = PacedLoop(cycle, interval_s=1.0, stop_timeout_s=5.0)
    life.start()
    assert cycle.entered.wait(WAIT)
    threading.Timer(0.1, release.set).start()
    assert life.stop() is StopResult.STOPPED
    assert cycle.reached[1].is_set()


def test_failing_cycles_and_a_throwing_sink_do_not_stop_the_loop() -> None:
    cycle = Recorder(saturated_for=100, fail_every=2)
    seen: list[Diagnostic] = []

    def sink(diagnostic: Diagnostic) -> None:
        seen.append(diagnostic)
        raise RuntimeError("the sink itself is broken")

    life = PacedLoop(cycle, interval_s=0.25, diagnostics=sink)
    life.start()
    try:
        assert cycle.reached[9].wait(WAIT)
    finally:
        life.stop()
    assert len(seen) >= 4 and all(d.code == "QL_STORAGE_UNAVAILABLE" for d in seen)


def test_start_and_stop_are_idempotent_and_stop_before_start_is_fine() -> None:
    life = PacedLoop(Recorder(), interval_s=1.0)
    assert life.stop() is StopResult.STOPPED
    life.start()  # a stopped lifecycle does not start again
    assert not life.running


def test_bounds_are_validated() -> None:
    with pytest.raises(InvalidConfig):
        PacedLoop(Recorder(), interval_s=0.1)
    with pytest.raises(InvalidConfig):
        PacedLoop(Recorder(), interval_s=1.0, stop_timeout_s=31)


def test_next_due_hint_shortens_the_wait() -> None:
    calls: list[int] = []
    second = threading.Event()

    def cycle() -> CycleReport:
        calls.append(1)
        if len(calls) >= 2:
            second.set()
        return CycleReport(next_due_in_ms=50)

    life = PacedLoop(cycle, interval_s=3600)
    life.start()
    try:
        assert second.wait(WAIT)  # a one-hour cadence, woken by the 50 ms hint
    finally:
        life.stop()


def test_the_idle_cap_replaces_the_interval_only_while_wakeups_are_reliable() -> None:
    cap: list[float | None] = [5.0]
    life = PacedLoop(Recorder(), interval_s=0.25, idle_cap_s=lambda: cap[0])
    delay = life._next_delay  # the pure part of the cadence
    assert delay(CycleReport(next_due_in_ms=None)) == 5.0  # nothing scheduled: the cap
    assert delay(CycleReport(next_due_in_ms=60_000)) == 5.0  # due later: the cap
    assert delay(CycleReport(next_due_in_ms=100)) == pytest.approx(0.102)  # due sooner: then
    assert delay(CycleReport(next_due_in_ms=0, saturated=True)) == 0.0
    cap[0] = None  # the LISTEN connection is down: back to the interval
    assert delay(CycleReport(next_due_in_ms=60_000)) == 0.25
    cap[0] = 0.1  # a cap below the interval never shortens it
    assert delay(CycleReport(next_due_in_ms=None)) == 0.25
    assert PacedLoop(Recorder(), interval_s=2.0)._next_delay(CycleReport()) == 2.0


def test_a_wake_ends_a_long_idle_sleep() -> None:
    cycle = Recorder()
    life = PacedLoop(cycle, interval_s=0.25, idle_cap_s=lambda: 3600.0)
    life.start()
    try:
        assert cycle.reached[1].wait(WAIT)
        life.wake()  # e.g. a NOTIFY for a publish
        assert cycle.reached[2].wait(WAIT)  # not an hour later
    finally:
        life.stop()
