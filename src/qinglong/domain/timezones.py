"""IANA time zone names: validation and canonicalisation of aliases.

Zone rules and the alias map both come from the `tzdata` package (its `tzdata.zi` link
lines give the aliases), so
``US/Eastern`` becomes ``America/New_York`` and ``Asia/Calcutta`` becomes
``Asia/Kolkata``. The UTC family (``Etc/UTC``, ``Zulu``, ...) becomes ``UTC``.

Legacy abbreviation names are refused. tzdata still ships the System V names ``EST``,
``MST``, ``HST``, ``CET``, ``EET``, ``MET``, ``WET`` and the POSIX-style ``EST5EDT``,
``CST6CDT``, ``MST7MDT``, ``PST8PDT``, but since 2024b most of them are mere links to one
city that happens to share the abbreviation today (``EST`` is ``America/Panama``,
``MET`` is ``Europe/Brussels``). Canonicalising would store a place the user never
named, so the refusal suggests a region and the fixed-offset ``Etc/GMT±N`` zone
instead. The set is derived from the installed tzdata, not listed by hand: every zone or
link name without a ``/`` that is a time zone abbreviation (2-4 upper-case letters
ending in ``T`` for "time", as in ``EST``) or a POSIX TZ string made of two of them
around an hour offset (``EST5EDT``). That rule picks exactly the eleven names above;
country aliases such as ``GB``, ``NZ``, ``PRC`` and ``ROK`` are places and stay
canonicalised (``GB`` is ``Europe/London``).

Two abbreviation-like families are kept: the UTC family, and ``GMT`` (with ``GMT0``,
``GMT+0``, ``GMT-0`` and ``Greenwich``), which becomes ``Etc/GMT``. GMT means a zero
offset and ``Etc/GMT`` is exactly that, a fixed UTC+00:00 that names no place, so what
is stored is what was asked for. (Whoever means British time with summer time should
use ``Europe/London``.)
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta
from importlib import resources
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from qinglong.errors import InvalidSchedule

UTC_NAME = "UTC"
_UTC_FAMILY = frozenset(
    {"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu"}
)
_GMT_FAMILY = frozenset({"GMT", "GMT0", "GMT+0", "GMT-0", "Greenwich"})
_ABBREVIATION = re.compile(r"[A-Z]{1,3}T")
_LEGACY_NAME = re.compile(rf"{_ABBREVIATION.pattern}(?:[0-9]{{1,2}}{_ABBREVIATION.pattern})?")

# Regions to suggest for each legacy name, with what they mean. A unit test checks that
# this covers every legacy name the installed tzdata has and that each region has the
# same standard offset as the legacy name.
_REGIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "EST": (("America/New_York", "US Eastern time, with DST"),),
    "EST5EDT": (("America/New_York", "US Eastern time, with DST"),),
    "CST6CDT": (("America/Chicago", "US Central time, with DST"),),
    "MST": (
        ("America/Denver", "US Mountain time, with DST"),
        ("America/Phoenix", "Arizona, no DST"),
    ),
    "MST7MDT": (("America/Denver", "US Mountain time, with DST"),),
    "PST8PDT": (("America/Los_Angeles", "US Pacific time, with DST"),),
    "HST": (("Pacific/Honolulu", "Hawaii, no DST"),),
    "CET": (("Europe/Paris", "Central European time, with DST"),),
    "MET": (("Europe/Berlin", "Central European time, with DST"),),
    "EET": (("Europe/Athens", "Eastern European time, with DST"),),
    "WET": (("Europe/Lisbon", "Western European time, with DST"),),
}
# A fixed instant in northern winter: the legacy zones' standard time.
_WINTER = datetime(2026, 1, 15, 12, tzinfo=UTC)


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


@functools.cache
def legacy_names() -> frozenset[str]:
    """The legacy abbreviation and POSIX-style names in the installed tzdata (module docs)."""
    zones, links = _tzdata_tables()
    return frozenset(
        name
        for name in zones | links.keys()
        if _LEGACY_NAME.fullmatch(name) and name not in _UTC_FAMILY | _GMT_FAMILY
    )


def canonical_timezone(name: str) -> str:
    """Return the canonical IANA name for ``name`` or raise InvalidSchedule."""
    if not isinstance(name, str) or not 1 <= len(name) <= 128 or not name.isprintable():
        raise InvalidSchedule("timezone", "must be an IANA time zone name such as Europe/Berlin")
    zones, links = _tzdata_tables()
    if name in _UTC_FAMILY:
        return UTC_NAME
    if name in legacy_names():
        raise InvalidSchedule("timezone", _legacy_advice(name, name))
    if name not in zones and name not in links:
        lowered = {z.lower(): z for z in zones | links.keys()}
        hint = lowered.get(name.lower())
        if hint in legacy_names():
            raise InvalidSchedule("timezone", _legacy_advice(name, hint))
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


def _legacy_advice(typed: str, legacy: str) -> str:
    """Why ``legacy`` (as the user typed it) is refused, and what to write instead."""
    kind = "abbreviation" if _ABBREVIATION.fullmatch(legacy) else "POSIX-style name"
    _, links = _tzdata_tables()
    alias = f" (tzdata keeps it only as an alias of {links[legacy]})" if legacy in links else ""
    suggestions = [f"{region} ({meaning})" for region, meaning in _REGIONS.get(legacy, ())]
    suggestions.append(_fixed_offset_suggestion(legacy))
    region = "a region" if legacy in _REGIONS else "a region (Area/City)"
    return (
        f"{typed!r} is a legacy {kind}, not a place{alias}: use {region} such as "
        + ", ".join(suggestions[:-1])
        + (" or " if len(suggestions) > 1 else "")
        + suggestions[-1]
    )


def standard_offset(name: str) -> timedelta:
    """The zone's northern-winter offset from UTC without DST (for advice and its tests)."""
    winter = _WINTER.astimezone(zone_info(name))
    return (winter.utcoffset() or timedelta()) - (winter.dst() or timedelta())


def _fixed_offset_suggestion(legacy: str) -> str:
    """``Etc/GMT+5 (a fixed UTC-05:00, no DST)``; POSIX ``Etc/GMT`` signs are inverted."""
    offset = standard_offset(legacy)
    minutes = int(offset.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    text = f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    if minutes == 0:
        return f"{UTC_NAME} (a fixed {text})"
    if minutes % 60:  # pragma: no cover - no legacy name has a fractional-hour offset
        return f"a fixed-offset zone for {text}"
    hours = -minutes // 60
    return f"Etc/GMT{hours:+d} (a fixed {text}, no DST)"


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
