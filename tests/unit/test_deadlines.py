"""The process's deadline watch (storage/postgres/deadlines.py): one thread runs each
deadline's action when it is due, in due order, and never a cancelled one."""

from __future__ import annotations

import threading

from qinglong.storage.postgres.deadlines import DeadlineWatch

WAIT_S = 10.0


def test_due_deadlines_run_in_order_and_cancelled_ones_never() -> None:
    watch = DeadlineWatch()
    ran: list[str] = []
    last = threading.Event()
    cancelled = watch.after(0.01, lambda: ran.append("cancelled"))
    watch.after(0.03, lambda: ran.append("second"))
    watch.after(0.02, lambda: ran.append("first"))
    cancelled.cancel()
    watch.after(0.04, lambda: (ran.append("last"), last.set()))
    assert last.wait(WAIT_S)
    assert ran == ["first", "second", "last"]


def test_a_sooner_deadline_wakes_a_watch_waiting_for_a_later_one() -> None:
    watch = DeadlineWatch()
    soon = threading.Event()
    later = watch.after(WAIT_S * 10, lambda: None)  # the watch now waits for this one
    watch.after(0.01, soon.set)
    assert soon.wait(WAIT_S), "the sooner deadline waited behind the later one"
    later.cancel()
