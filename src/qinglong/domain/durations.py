"""Durations as people write them (``500ms``, ``30s``, ``1h30m``, ``1.5h``, ``2d4h``): the one
grammar the CLI's options, the HTTP API, definition files and the panel read (the panel's
script mirrors it), and the shortest text for a duration (what definition files are written
with)."""

from __future__ import annotations

import re

_PART = re.compile(r"\s*(\d{1,15}(?:\.\d{1,6})?)\s*(ms|s|m|h|d)")
_UNIT_MS = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}
_ORDER = list(_UNIT_MS)
MAX_DURATION_MS = 2**53 - 1


def parse_duration_ms(text: str) -> int:
    """``500ms``, ``30s``, ``1.5h``, or parts from the largest unit down: ``1h30m``, ``2d4h``,
    ``1m 30s``. A number without a unit is refused (never read as seconds or milliseconds)."""
    hint = (f"{text!r} is not a duration; use numbers with units (d, h, m, s, ms), largest "
            "first: 500ms, 30s, 5m, 1h30m, 1d")
    position, total, last_unit = 0, 0.0, -1
    stripped = text.rstrip()
    while position < len(stripped):
        match = _PART.match(stripped, position)
        if not match:
            raise ValueError(hint)
        unit = _ORDER.index(match.group(2))
        if unit <= last_unit:
            raise ValueError(hint)
        last_unit = unit
        total += float(match.group(1)) * _UNIT_MS[match.group(2)]
        position = match.end()
    if last_unit < 0:
        raise ValueError(hint)
    if total != int(total):
        raise ValueError(f"{text!r} is not a whole number of milliseconds")
    if total > MAX_DURATION_MS:
        raise ValueError(f"{text!r} is too long")
    return int(total)


def format_duration(ms: int) -> str:
    """The shortest text ``parse_duration_ms`` reads back as ``ms``: ``1h30m``, ``500ms``."""
    parts, rest = [], ms
    for unit, size in _UNIT_MS.items():
        if rest >= size:
            count, rest = divmod(rest, size)
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"
