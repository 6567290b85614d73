"""The group reaper kills the commands of an executor that died without cleaning up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from qinglong.execution.reaper import GroupReaper

OWNER = textwrap.dedent("""
    import os, signal, subprocess, sys
    from qinglong.execution.reaper import GroupReaper
    reaper = GroupReaper()
    reaper.start()
    kept = subprocess.Popen(["sleep", "60"], start_new_session=True)
    done = subprocess.Popen(["sleep", "60"], start_new_session=True)
    reaper.watch(kept.pid)
    reaper.watch(done.pid)
    reaper.forget(done.pid)  # ended as far as the executor knows: not the reaper's to kill
    print(kept.pid, done.pid, flush=True)
    sys.stdin.readline()
    os.kill(os.getpid(), signal.SIGKILL)
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie waits for its reaping only
        return stat.read().split(") ", 1)[1][0] != "Z"


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_killed_owner_takes_its_watched_groups_with_it() -> None:
    with subprocess.Popen([sys.executable, "-c", OWNER], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as owner:
        assert owner.stdout is not None and owner.stdin is not None
        kept, done = (int(word) for word in owner.stdout.readline().split())
        try:
            time.sleep(0.3)
            assert _alive(kept) and _alive(done)  # nothing happens while the owner lives
            owner.stdin.write("die\n")
            owner.stdin.flush()
            assert owner.wait(10) == -signal.SIGKILL
            assert _gone_within(kept, 5.0), "the watched command outlived its killed owner"
            assert _alive(done)  # a forgotten group is left alone
        finally:
            for pid in (kept, done):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def test_a_clean_close_kills_nothing_that_was_forgotten() -> None:
    reaper = GroupReaper()
    reaper.start()
    command = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        reaper.watch(command.pid)
        reaper.forget(command.pid)
        reaper.close()
        assert command.poll() is None
    finally:
        command.kill()
        command.wait()
