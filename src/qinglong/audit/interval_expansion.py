"""The audit's expansion of interval and one-shot schedules (``every 1m30s from
2026-12-01T00:00:00Z``, ``at 2026-12-24T10:00:00Z``; see ``docs/controls/triggers.md``): plain
arithmetic on their stored text, ``anchor + k * every`` for k >= 0, or the one instant;
neither reads a time zone."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from qinglong.audit.cron_walls import MAX_NAIVE_ITERATIONS
from qinglong.audit.wall_times import epoch_of

_EVERY_TEXT = re.compile(r"every ((?:[0-9]+[dhms])+) from ([0-9]{4}-[0-9]{2}-[0-9]{2}T"
                         r"[0-9]{2}:[0-9]{2}:[0-9]{2}Z)")
_AT_TEXT = re.compile(r"at ([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z)")
_UNIT_S = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}


def _utc_seconds(text: str) -> int:
    return epoch_of(datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC))


def arithmetic_occurrences(expression: str, start_ms: int, end_ms: int) -> list[int]:
    """The occurrences of an interval or one-shot schedule in ``[start_ms, end_ms]``."""
    first_s = -(-start_ms // 1000)
    last_s = end_ms // 1000
    once = _AT_TEXT.fullmatch(expression)
    if once is not None:
        at_s = _utc_seconds(once.group(1))
        return [at_s * 1000] if first_s <= at_s <= last_s else []
    every = _EVERY_TEXT.fullmatch(expression)
    if every is None:
        raise ValueError(f"schedule {expression!r} is neither 'every D from T' nor 'at T'")
    step_s = sum(int(part[:-1]) * _UNIT_S[part[-1]]
                 for part in re.findall(r"[0-9]+[dhms]", every.group(1)))
    if step_s <= 0:
        raise ValueError(f"schedule {expression!r} has no interval")
    anchor_s = _utc_seconds(every.group(2))
    if first_s > last_s:
        return []
    k = max(0, -(-(first_s - anchor_s) // step_s))  # the first k with anchor + k*step >= first
    count = (last_s - anchor_s) // step_s - k + 1
    if count > MAX_NAIVE_ITERATIONS:
        raise ValueError(f"window too large for {expression!r}: {count:,} occurrences (limit "
                         f"{MAX_NAIVE_ITERATIONS:,}); audit a shorter window")
    return [(anchor_s + (k + i) * step_s) * 1000 for i in range(max(0, count))]
