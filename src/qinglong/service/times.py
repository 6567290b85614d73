"""How instants are shown: RFC 3339 in UTC for machines, local wall time next to UTC for people."""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfoNotFoundError

from qinglong.domain.instants import rfc3339
from qinglong.domain.timezones import zone_info

__all__ = ["in_zone", "local_and_utc", "rfc3339", "viewer_zone"]  # rfc3339: domain/instants.py


def in_zone(ms: int, zone: str) -> str:
    """The wall time of ``ms`` in an IANA zone, with its offset (e.g. 2026-03-08T03:00:00-07:00)."""
    return datetime.fromtimestamp(ms / 1000, UTC).astimezone(zone_info(zone)).isoformat()


def viewer_zone() -> tzinfo | None:
    """The zone of whoever reads the output: ``TZ`` if it names an IANA zone, else the zone
    ``/etc/localtime`` links to; None (UTC) when neither says."""
    name = os.environ.get("TZ", "").removeprefix(":")
    if not name:
        with contextlib.suppress(OSError):
            target = os.readlink("/etc/localtime")
            if "zoneinfo/" in target:
                name = target.split("zoneinfo/", 1)[1]
    if not name or name in ("UTC", "Etc/UTC"):
        return None
    try:
        return zone_info(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def local_and_utc(ms: int | None, local: tzinfo | None) -> str:
    """``2026-11-30 19:37:05 CST (11:37:05Z)``, or just the UTC time when local is UTC."""
    if ms is None:
        return "-"
    at = datetime.fromtimestamp(ms / 1000, UTC)
    utc = at.strftime("%Y-%m-%d %H:%M:%SZ")
    if local is None or at.astimezone(local).utcoffset() == at.utcoffset():
        return utc
    here = at.astimezone(local)
    return f"{here.strftime('%Y-%m-%d %H:%M:%S %Z')} ({at.strftime('%H:%M:%SZ')})"
