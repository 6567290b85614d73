"""The long-running commands' console (cli/console.py): ANSI styling is kept on a terminal
and stripped elsewhere, as click does it, with the terminal check made once per stream
instead of once per line (a system call a Run on a busy worker)."""

from __future__ import annotations

import io

import pytest

from qinglong.cli.console import EventConsole, is_terminal
from qinglong.diagnostics import Diagnostic

STYLED = "\x1b[31mred\x1b[0m"


class Stream(io.StringIO):
    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal
        self.checks = 0

    def isatty(self) -> bool:
        self.checks += 1
        return self.terminal


def console_on(monkeypatch: pytest.MonkeyPatch, terminal: bool) -> tuple[EventConsole, Stream]:
    err = Stream(terminal)
    monkeypatch.setattr("sys.stdout", Stream(terminal))
    monkeypatch.setattr("sys.stderr", err)
    return EventConsole(json_events=False, who={"worker": "w1"}), err


def diagnostic(n: int) -> Diagnostic:
    return Diagnostic(source="executor", code="STORAGE_UNAVAILABLE", message=f"{STYLED} {n}")


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "file"])
def test_styling_is_kept_on_a_terminal_only_and_checked_once(
    monkeypatch: pytest.MonkeyPatch, terminal: bool
) -> None:
    console, err = console_on(monkeypatch, terminal)
    checks = err.checks
    for n in range(3):
        console.diagnostic(diagnostic(n))
    lines = err.getvalue().splitlines()
    assert len(lines) == 3
    assert all(line.endswith(f"[w1] error executor STORAGE_UNAVAILABLE: "
                             f"{STYLED if terminal else 'red'} {n}")
               for n, line in enumerate(lines))
    assert err.checks == checks  # no check a line


def test_a_closed_missing_or_odd_stream_is_no_terminal() -> None:
    closed = io.StringIO()
    closed.close()
    assert not is_terminal(closed)
    assert not is_terminal(None)
    assert not is_terminal(object())  # type: ignore[arg-type]  # a stand-in without isatty
