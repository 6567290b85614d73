"""Child process handles that survive our own crash: pid plus kernel start time.

A handle ``pid:<pid>:start:<ticks>`` lets a restarted executor tell whether the
process it started is still the one holding that pid (pids are reused).
"""

from __future__ import annotations

import os
import re
import signal

_HANDLE = re.compile(r"^pid:(\d+):start:(\d+)$")


def process_start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks), or None if gone."""
    try:  # one open, one read, one close (a worker reads it for every command it starts)
        handle = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            text = os.read(handle, 4096).decode("utf-8", errors="replace")
        finally:
            os.close(handle)
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may contain spaces.
    fields = text[text.rfind(")") + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def make_handle(pid: int) -> str:
    return f"pid:{pid}:start:{process_start_ticks(pid) or 0}"


def kill_group(pgid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def settle_orphan(handle: str | None) -> str:
    """Kill the process group a previous executor left behind, if it is still ours.

    Returns ``killed`` when it was still running, ``gone`` when it had exited (or the
    pid now belongs to another process), ``unknown`` when the handle is unreadable.
    """
    match = _HANDLE.fullmatch(handle or "")
    if not match:
        return "unknown"
    pid, ticks = int(match.group(1)), int(match.group(2))
    current = process_start_ticks(pid)
    if current is None:
        # The leader has exited, but its children may still run in its group. Linux never
        # hands out a pid that is still some group's id, so this group can only be ours.
        return "killed" if kill_group(pid, signal.SIGKILL) else "gone"
    if current != ticks:
        return "gone"  # the pid (and so its group id) now belongs to someone else
    return "killed" if kill_group(pid, signal.SIGKILL) else "gone"
