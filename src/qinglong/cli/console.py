"""What the long-running commands (`ql serve`, `ql control`, `ql worker`) print as things
happen: a line of text for people, stamped with the time, or one JSON object a line."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import IO, Any, ClassVar

import click

from qinglong.cli.context import CLOCK
from qinglong.diagnostics import Diagnostic


def is_terminal(stream: IO[str] | None) -> bool:
    """Whether ``stream`` is a terminal (False when it is missing, closed or cannot say)."""
    try:
        return stream is not None and stream.isatty()
    except Exception:  # noqa: BLE001 -- as click's own check: no answer is no terminal
        return False


def stamp() -> str:
    """Now as HH:MM:SS.mmm (UTC), the prefix of every text line."""
    return datetime.fromtimestamp(CLOCK.now_ms() / 1000, UTC).strftime("%H:%M:%S.%f")[:-3]


class EventConsole:
    """Prints events from any thread, one whole line at a time.

    ``who`` names the process: its fields go into each JSON event ({"worker": id}) and its
    values, in brackets, before each text line. ``quiet`` keeps text lines off stdout (those
    for stderr still print); JSON events always print."""

    _error_label: ClassVar[str] = "error"  # what starts the line of a diagnostic

    def __init__(self, *, json_events: bool, quiet: bool = False,
                 who: Mapping[str, str] | None = None) -> None:
        self._json = json_events
        self._quiet = quiet
        self._who = dict(who or {})
        self._label = "".join(f"[{value}] " for value in self._who.values())
        self._lock = threading.Lock()
        # Whether a line keeps ANSI styling, decided once per stream by the terminal check
        # click makes for each line otherwise (a system call a line, and a line a Run).
        self._color = {False: is_terminal(sys.stdout), True: is_terminal(sys.stderr)}

    def _emit(self, event: Mapping[str, Any], text: str, *, err: bool = False) -> None:
        with self._lock:
            if self._json:
                click.echo(json.dumps({**self._who, "at_ms": CLOCK.now_ms(), **event},
                                      sort_keys=True), err=err, color=self._color[err])
            elif not self._quiet or err:
                click.echo(f"{stamp()} {self._label}{text}", err=err, color=self._color[err])

    def diagnostic(self, diagnostic: Diagnostic) -> None:
        """A problem a loop reported (to stderr)."""
        self._emit({"event": "error", "source": diagnostic.source, "code": diagnostic.code,
                    "message": diagnostic.message},
                   f"{self._error_label} {diagnostic.source} {diagnostic.code}: "
                   f"{diagnostic.message}", err=True)
