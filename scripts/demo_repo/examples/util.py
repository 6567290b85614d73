# A subscribed script without a cron line: imported as a script, no task is made for it.
from __future__ import annotations


def double(value: int) -> int:
    return value * 2
