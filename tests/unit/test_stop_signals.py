"""SIGINT/SIGTERM set the stop event from a watcher thread, never from the handler: a handler
that ran while the main thread held the event's own lock (inside ``stop.wait``) and then
set the event would wait on itself for ever. Run in a child process, so a hang is a
timeout here, not a stuck test worker."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import os, signal, sys, threading, time
    from qinglong.cli.stop_signals import StopSignals

    def until(condition, what):
        deadline = time.monotonic() + 10
        while not condition():  # each short sleep lets a pending handler run on this thread
            assert time.monotonic() < deadline, what
            time.sleep(0.001)

    repeats = []
    stop = threading.Event()
    with StopSignals(stop, lambda: repeats.append(1)) as signals:
        with stop._cond:  # the main thread holds the event's lock, as inside stop.wait()
            os.kill(os.getpid(), signal.SIGTERM)
            # the handler runs here, on this thread, the lock held
            until(lambda: signals.seen, "the handler did not run")
            assert not stop.is_set()  # (the watcher cannot set it while we hold the lock)
        assert stop.wait(5), "the first signal did not set the event"
        assert signals.seen == [signal.SIGTERM] and repeats == []
        os.kill(os.getpid(), signal.SIGINT)
        until(lambda: repeats, "the repeated signal was not acted on")
        assert repeats == [1] and signals.seen == [signal.SIGTERM, signal.SIGINT], repeats
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    print("ok")
""")


@pytest.mark.parametrize("run", range(3))
def test_a_signal_while_the_main_thread_holds_the_events_lock_still_stops(run: int) -> None:
    del run
    done = subprocess.run([sys.executable, "-c", CHILD], check=False, capture_output=True, text=True,
                          timeout=30)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr
