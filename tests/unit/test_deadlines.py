"""The process's deadline watch (storage/postgres/deadlines.py): one thread runs each
deadline's action when it is due, in due order, and never a cancelled one."""

from __future__ import annotations

import threading

from qinglong.storage.postgres.deadlines import DeadlineWatch
from qinglong.testing.clock import FakeClock

WAIT_S = 10.0


def test_due_deadlines_run_in_order_and_cancelled_ones_never() -> None:
    # on a fake clock nothing is due until the test moves it, so the deadline is cancelled
    # before it can be due however slowly this thread runs (on the real clock it could come
    # due before the cancel on a busy host)
    clock = FakeClock()
    watch = DeadlineWatch(clock=clock)
    ran: list[str] = []
    last = threading.Event()
    cancelled = watch.after(0.01, lambda: ran.append("cancelled"))
    watch.after(0.03, lambda: ran.append("second"))
    watch.after(0.02, lambda: ran.append("first"))
    cancelled.cancel()
    watch.after(0.04, lambda: (ran.append("last"), last.set()))
    assert ran == []  # none is due yet
    clock.advance(40)  # all four due at once: run in due order, the cancelled one never
    assert last.wait(WAIT_S)
    assert ran == ["first", "second", "last"]


def test_a_sooner_deadline_wakes_a_watch_waiting_for_a_later_one() -> None:
    watch = DeadlineWatch()
    soon = threading.Event()
    later = watch.after(WAIT_S * 10, lambda: None)  # the watch now waits for this one
    watch.after(0.01, soon.set)
    assert soon.wait(WAIT_S), "the sooner deadline waited behind the later one"
    later.cancel()
