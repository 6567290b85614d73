"""SIGINT and SIGTERM as a stop event, set without taking a lock in the signal handler.

A Python signal handler runs on the main thread between two bytecodes, possibly while that
thread holds the very lock ``Event.set`` takes: inside ``stop.wait(...)``, between entering
the event's condition and releasing it. Setting the event from the handler then waits on
itself for ever (a `ql serve` was seen ignoring its SIGTERM that way). So the handler only
counts signals (and acts on a repeated one); the event is set by a watcher thread woken
through ``signal.set_wakeup_fd``, to which the interpreter writes each signal's number as
soon as it arrives, on whichever thread.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Self

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """While entered: the first SIGINT/SIGTERM sets ``stop``; each later one calls
    ``on_repeat`` in the handler (which may raise, e.g. SystemExit, to end the main thread).
    Enter and exit on the main thread."""

    def __init__(self, stop: threading.Event, on_repeat: Callable[[], None]) -> None:
        self.stop = stop
        self.seen: list[int] = []
        self._on_repeat = on_repeat
        self._previous: dict[int, object] = {}
        self._previous_fd = -1
        self._pipe: tuple[int, int] | None = None
        self._watcher: threading.Thread | None = None

    def __enter__(self) -> Self:
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        self._pipe = (read_fd, write_fd)
        self._watcher = threading.Thread(target=self._watch, args=(read_fd,), name="ql-signals",
                                         daemon=True)
        self._watcher.start()
        self._previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        self._previous = {sig: signal.signal(sig, self._on_signal) for sig in STOP_SIGNALS}
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        signal.set_wakeup_fd(self._previous_fd)
        if self._pipe is not None:
            os.close(self._pipe[1])  # the watcher reads end-of-file and returns
            if self._watcher is not None:
                self._watcher.join(timeout=1.0)
            os.close(self._pipe[0])
            self._pipe = None

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        del frame
        self.seen.append(signum)  # no lock: the main thread may hold any of them here
        if len(self.seen) > 1:
            self._on_repeat()

    def _watch(self, read_fd: int) -> None:
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:
                return
            if any(number in STOP_SIGNALS for number in data):
                self.stop.set()
