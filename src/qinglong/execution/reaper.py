"""The group reaper: a small companion process that kills the commands of an executor that
died without cleaning up (SIGKILL, OOM killer, a crash).

Each command runs in a process group of its own, so nothing delivers the executor's death
to it, and a command left running beside the retry of its Run would be two processes for
one Run. The executor tells the reaper, through a pipe only the executor holds, which
groups it runs (``+PGID``) and which have ended (``-PGID``). When the pipe reaches end of
file -- the executor closed it, or the kernel did because the executor died -- the reaper
kills every group still listed and exits. A paused executor keeps its pipe open: its
commands are stopped by its own self-fence when it resumes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import IO


class GroupReaper:
    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._pipe: IO[str] | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        read_end, write_end = os.pipe()  # both close on exec: no command inherits them
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "qinglong.execution.reaper"], stdin=read_end,
                stdout=subprocess.DEVNULL, start_new_session=True)
        finally:
            os.close(read_end)
        self._pipe = os.fdopen(write_end, "w", buffering=1)

    def _send(self, line: str) -> None:
        with self._lock:
            if self._pipe is None:
                return
            try:
                self._pipe.write(line + "\n")
            except OSError:
                self._pipe = None  # the reaper is gone: nothing more to tell it

    def watch(self, pgid: int) -> None:
        self._send(f"+{pgid}")

    def forget(self, pgid: int) -> None:
        self._send(f"-{pgid}")

    def close(self) -> None:
        """End the reaper: it kills what is still listed (nothing, after a clean stop)."""
        with self._lock:
            pipe, self._pipe = self._pipe, None
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass
        if self._process is not None:
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(5)


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is for the executor
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stop with the executor, not before
    groups: set[int] = set()
    for line in sys.stdin:
        text = line.strip()
        if len(text) > 1 and text[1:].isdigit():
            (groups.add if text[0] == "+" else groups.discard)(int(text[1:]))
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
