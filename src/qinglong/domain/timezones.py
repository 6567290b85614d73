"""IANA time zone names: validation and canonicalisation of aliases.

Zone rules and the alias map both come from the `tzdata` package (its `tzdata.zi` link
lines give the aliases), so
``US/Eastern`` becomes ``America/New_York`` and ``Asia/Calcutta`` becomes
``Asia/Kolkata``. The UTC family (``Etc/UTC``, ``Zulu``, ...) becomes ``UTC``.
"""

from __future__ import annotations

import functools
from importlib import resources
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from qinglong.errors import InvalidSchedule

UTC_NAME = "UTC"
_UTC_FAMILY = frozenset(
    {"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu"}
)


@functools.cache
def _tzdata_tables() -> tuple[frozenset[str], dict[str, str]]:
    base = resources.files("tzdata")
    zones = frozenset(
        line.strip()
        for line in base.joinpath("zones").read_text(encoding="utf-8").splitlines()
        if line.strip()
    )
    links: dict[str, str] = {}
    for line in base.joinpath("zoneinfo", "tzdata.zi").read_text(encoding="utf-8").splitlines():
        if line.startswith("L "):
            _, target, alias = line.split()
            links[alias] = target
    return zones, links


def canonical_timezone(name: str) -> str:
    """Return the canonical IANA name for ``name`` or raise InvalidSchedule."""
    if not isinstance(name, str) or not 1 <= len(name) <= 128 or not name.isprintable():
        raise InvalidSchedule("timezone", "must be an IANA time zone name such as Europe/Berlin")
    zones, links = _tzdata_tables()
    if name in _UTC_FAMILY:
        return UTC_NAME
    if name not in zones and name not in links:
        lowered = {z.lower(): z for z in zones}
        hint = lowered.get(name.lower())
        suffix = f" (did you mean {hint!r}?)" if hint else ""
        raise InvalidSchedule("timezone", f"unknown IANA time zone {name!r}{suffix}")
    seen = set()
    while name in links and name not in seen:
        seen.add(name)
        name = links[name]
    if name in _UTC_FAMILY:
        return UTC_NAME
    try:
        zone_info(name)
    except ZoneInfoNotFoundError as exc:  # pragma: no cover - tzdata always ships its zones
        raise InvalidSchedule("timezone", f"time zone {name!r} cannot be loaded") from exc
    return name


@functools.cache
def zone_info(name: str) -> ZoneInfo:
    """Zone rules from the `tzdata` package only (not the host's /usr/share/zoneinfo), so
    names, aliases and offsets all come from one tz database version on every machine."""
    resource = resources.files("tzdata").joinpath("zoneinfo", *name.split("/"))
    try:
        with resource.open("rb") as handle:
            return ZoneInfo.from_file(handle, key=name)
    except (OSError, ValueError) as exc:
        raise ZoneInfoNotFoundError(name) from exc
