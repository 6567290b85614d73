"""How an instant is written for machines: RFC 3339 in UTC, to the millisecond."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(ms: int | None) -> str | None:
    """``2026-11-30T11:37:05.123Z`` for epoch milliseconds; None stays None."""
    if ms is None:
        return None
    return (datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"))
