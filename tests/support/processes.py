"""Whether a process still runs, as the tests that kill or stop commands ask it."""

from __future__ import annotations


def process_running(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie waiting to be reaped does not, nor a process reaped
    while its ``/proc`` entry is read (open fails, or the read does with ESRCH)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")
