"""testkit.cluster.freeze: once it returns, no thread of the process runs until SIGCONT.

A bare SIGSTOP is not that: kill(2) returns with the stop queued, and a thread other than
the one the kernel woke to take it can go on for a while: on this machine 27 of 460 bare
stops let a thread echo a byte written right after kill returned. The fault tests freeze
workers and replicas and then judge what a frozen process could not have written."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys

import pytest

from testkit.cluster import all_threads_stopped, freeze

# a main thread asleep and a second thread echoing each byte from one pipe to the other
ECHO = """
import os, sys, threading, time
source, sink = int(sys.argv[1]), int(sys.argv[2])
def echo():
    while True:
        os.write(sink, os.read(source, 1))
threading.Thread(target=echo, daemon=True).start()
os.write(sink, b"r")
while True:
    time.sleep(1)
"""
TRIALS = 20


def readable(fd: int, timeout: float) -> bool:
    return bool(select.select([fd], [], [], timeout)[0])


def test_a_frozen_process_runs_no_thread_until_continued() -> None:
    to_child, ours_in = os.pipe()
    ours_out, from_child = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", ECHO, str(to_child), str(from_child)],
                             pass_fds=(to_child, from_child))
    os.close(to_child)
    os.close(from_child)
    try:
        assert os.read(ours_out, 1) == b"r"  # the echo thread is up
        for trial in range(TRIALS):
            freeze(child, "echo")
            assert all_threads_stopped(child.pid)
            os.write(ours_in, b"x")
            # frozen: the echo thread cannot take the byte, however long we look
            assert not readable(ours_out, 0.02), f"a thread ran after freeze (trial {trial})"
            child.send_signal(signal.SIGCONT)
            assert os.read(ours_out, 1) == b"x"  # and once continued it does
            assert not all_threads_stopped(child.pid)
    finally:
        child.kill()
        child.wait(10)
        os.close(ours_in)
        os.close(ours_out)


def test_freeze_refuses_a_process_that_has_exited() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(10)
    with pytest.raises(ProcessLookupError, match="gone exited before it stopped"):
        freeze(child, "gone", timeout=1)
