"""IANA time zone validation and alias canonicalisation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, available_timezones

import pytest

from qinglong.domain.cron import CronSchedule
from qinglong.domain.timezones import (
    _REGIONS,
    _tzdata_tables,
    canonical_timezone,
    legacy_names,
    standard_offset,
)
from qinglong.errors import InvalidSchedule

ALIASES = [
    ("US/Eastern", "America/New_York"),
    ("Asia/Calcutta", "Asia/Kolkata"),
    ("Europe/Kiev", "Europe/Kyiv"),
    ("Asia/Saigon", "Asia/Ho_Chi_Minh"),
    ("America/Indianapolis", "America/Indiana/Indianapolis"),
    ("Australia/LHI", "Australia/Lord_Howe"),
    ("PRC", "Asia/Shanghai"),
    ("GB", "Europe/London"),
    ("NZ", "Pacific/Auckland"),
]


@pytest.mark.parametrize(("alias", "canonical"), ALIASES, ids=[a for a, _ in ALIASES])
def test_aliases_become_their_canonical_zone(alias: str, canonical: str) -> None:
    assert canonical_timezone(alias) == canonical


UTC_FAMILY = ["UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu"]


@pytest.mark.parametrize("name", UTC_FAMILY)
def test_the_utc_family_becomes_utc(name: str) -> None:
    assert canonical_timezone(name) == "UTC"


CANONICAL = [
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Asia/Shanghai",
    "Asia/Kolkata",
    "Australia/Lord_Howe",
    "America/Argentina/Buenos_Aires",
    "America/Indiana/Indianapolis",
    "Pacific/Chatham",
]


@pytest.mark.parametrize("name", CANONICAL)
def test_canonical_names_are_kept(name: str) -> None:
    assert canonical_timezone(name) == name


def test_every_available_zone_canonicalises_to_a_fixed_point_with_the_same_rules() -> None:
    """An alias and its target are the same zone: same offsets at every sample instant.

    Samples start in 2026: historical rules may legitimately differ when the system's zoneinfo
    (which ZoneInfo prefers) is older than the tzdata package the alias table comes from.
    """
    samples = [
        datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=37 * i, hours=5 * i) for i in range(60)
    ]
    checked = 0
    for name in sorted(available_timezones()):
        if name in {"localtime", "posixrules", "Factory"} or name in legacy_names():
            continue
        target = canonical_timezone(name)
        assert canonical_timezone(target) == target, name
        source_zone, target_zone = ZoneInfo(name), ZoneInfo(target)
        for instant in samples:
            assert instant.astimezone(source_zone).utcoffset() == instant.astimezone(
                target_zone
            ).utcoffset(), (name, target, instant)
        checked += 1
    assert checked > 400  # tzdata ships ~600 names; make sure the loop really ran


def test_cron_schedule_stores_the_canonical_zone() -> None:
    assert CronSchedule.parse("0 0 * * *", "US/Eastern").timezone == "America/New_York"
    assert CronSchedule.parse("0 0 * * *", "Zulu").timezone == "UTC"
    assert CronSchedule.parse("0 0 * * *", "US/Eastern") == CronSchedule.parse(
        "0 0 * * *", "America/New_York"
    )


UNKNOWN = [
    "Mars/Olympus_Mons",
    "America/Springfield",
    "Etc/Unknown",
    "Europe/Berlin ",  # no trimming
    " Europe/Berlin",
    "Europe//Berlin",
    "../etc/passwd",
    "localtime",
    "EST+5",
]


@pytest.mark.parametrize("name", UNKNOWN)
def test_unknown_zones_are_refused(name: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        canonical_timezone(name)
    assert info.value.field == "timezone"
    assert "unknown IANA time zone" in info.value.rule
    assert repr(name) in info.value.rule
    assert "did you mean" not in info.value.rule


CASE_HINTS = [
    ("america/new_york", "America/New_York"),
    ("EUROPE/BERLIN", "Europe/Berlin"),
    ("utc", "UTC"),
    ("asia/SHANGHAI", "Asia/Shanghai"),
]


@pytest.mark.parametrize(("name", "hint"), CASE_HINTS, ids=[n for n, _ in CASE_HINTS])
def test_a_wrong_case_gets_a_hint(name: str, hint: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        canonical_timezone(name)
    assert info.value.field == "timezone"
    assert f"did you mean {hint!r}?" in info.value.rule


NOT_NAMES = [
    None,
    42,
    3.5,
    b"UTC",
    ["UTC"],
    "",
    "A" * 129,
    "Europe/Berlin\x00",
    "America/New_York\n",
    "Europe/\tBerlin",
]


@pytest.mark.parametrize(
    "value",
    NOT_NAMES,
    ids=["none", "int", "float", "bytes", "list", "empty", "129-chars", "nul", "newline", "tab"],
)
def test_non_strings_empty_overlong_and_unprintable_are_refused(value: object) -> None:
    with pytest.raises(InvalidSchedule) as info:
        canonical_timezone(value)  # type: ignore[arg-type]
    assert info.value.field == "timezone"
    assert "IANA time zone name" in info.value.rule


def test_a_128_character_name_is_looked_up_not_rejected_for_length() -> None:
    with pytest.raises(InvalidSchedule) as info:
        canonical_timezone("A" * 128)
    assert "unknown IANA time zone" in info.value.rule


def test_cron_schedule_rejects_unknown_zones_with_the_timezone_field() -> None:
    with pytest.raises(InvalidSchedule) as info:
        CronSchedule.parse("0 0 * * *", "Nowhere/City")
    assert info.value.field == "timezone"


# --- legacy abbreviations and POSIX-style names --------------------------------------------

LEGACY = {
    "EST", "MST", "HST", "CET", "EET", "MET", "WET",
    "EST5EDT", "CST6CDT", "MST7MDT", "PST8PDT",
}


def test_the_legacy_set_derived_from_tzdata_is_exactly_the_system_v_names() -> None:
    """If a tzdata release adds or drops such a name, this test asks for a decision."""
    assert legacy_names() == LEGACY


LEGACY_ADVICE = [
    # (name, fragments of the message)
    ("EST", ["'EST' is a legacy abbreviation, not a place",
             "alias of America/Panama",
             "use a region such as America/New_York (US Eastern time, with DST)",
             "or Etc/GMT+5 (a fixed UTC-05:00, no DST)"]),
    ("MST", ["alias of America/Phoenix", "America/Denver (US Mountain time, with DST)",
             "America/Phoenix (Arizona, no DST)", "Etc/GMT+7 (a fixed UTC-07:00, no DST)"]),
    ("HST", ["alias of Pacific/Honolulu", "Pacific/Honolulu", "Etc/GMT+10"]),
    ("CET", ["alias of Europe/Brussels", "Europe/Paris", "Etc/GMT-1 (a fixed UTC+01:00, no DST)"]),
    ("MET", ["alias of Europe/Brussels", "Europe/Berlin", "Etc/GMT-1"]),
    ("EET", ["alias of Europe/Athens", "Europe/Athens", "Etc/GMT-2 (a fixed UTC+02:00, no DST)"]),
    ("WET", ["alias of Europe/Lisbon", "Europe/Lisbon", "or UTC (a fixed UTC+00:00)"]),
    ("EST5EDT", ["'EST5EDT' is a legacy POSIX-style name, not a place",
                 "America/New_York (US Eastern time, with DST)", "Etc/GMT+5"]),
    ("CST6CDT", ["legacy POSIX-style name", "America/Chicago", "Etc/GMT+6"]),
    ("MST7MDT", ["legacy POSIX-style name", "America/Denver", "Etc/GMT+7"]),
    ("PST8PDT", ["legacy POSIX-style name", "America/Los_Angeles", "Etc/GMT+8"]),
    # any case: the user still means the abbreviation, not 'did you mean EST?'
    ("est", ["'est' is a legacy abbreviation", "America/New_York", "Etc/GMT+5"]),
    ("Pst8pdt", ["'Pst8pdt' is a legacy POSIX-style name", "America/Los_Angeles"]),
]


@pytest.mark.parametrize(("name", "fragments"), LEGACY_ADVICE, ids=[n for n, _ in LEGACY_ADVICE])
def test_legacy_names_are_refused_with_concrete_alternatives(
    name: str, fragments: list[str]
) -> None:
    with pytest.raises(InvalidSchedule) as info:
        canonical_timezone(name)
    assert info.value.field == "timezone"
    assert info.value.code == "QL_INVALID_SCHEDULE"
    for fragment in fragments:
        assert fragment in info.value.rule
    assert "did you mean" not in info.value.rule
    with pytest.raises(InvalidSchedule) as again:
        CronSchedule.parse("0 0 * * *", name)
    assert again.value.field == "timezone"


def test_the_posix_style_names_that_are_still_zones_get_no_alias_note() -> None:
    _, links = _tzdata_tables()
    for name in sorted(legacy_names() - links.keys()):
        with pytest.raises(InvalidSchedule) as info:
            canonical_timezone(name)
        assert "alias of" not in info.value.rule, name


def test_the_exact_message_for_est() -> None:
    with pytest.raises(InvalidSchedule) as info:
        canonical_timezone("EST")
    assert info.value.message == (
        "timezone: 'EST' is a legacy abbreviation, not a place (tzdata keeps it only as an alias"
        " of America/Panama): use a region such as America/New_York (US Eastern time, with DST)"
        " or Etc/GMT+5 (a fixed UTC-05:00, no DST)"
    )


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_every_suggestion_is_canonical_and_keeps_the_standard_offset(name: str) -> None:
    assert name in _REGIONS
    for region, _ in _REGIONS[name]:
        assert canonical_timezone(region) == region
        assert standard_offset(region) == standard_offset(name), (name, region)
    with pytest.raises(InvalidSchedule) as info:
        canonical_timezone(name)
    hours = -int(standard_offset(name).total_seconds()) // 3600
    fixed = "UTC" if hours == 0 else f"Etc/GMT{hours:+d}"
    assert info.value.rule.endswith(f" or {fixed} (a fixed UTC{-hours:+03d}:00" + (
        ")" if hours == 0 else ", no DST)"
    ))
    assert canonical_timezone(fixed) == fixed
    assert datetime(2026, 7, 1, tzinfo=UTC).astimezone(ZoneInfo(fixed)).utcoffset() == (
        standard_offset(name)
    )


KEPT = [
    # the GMT family stays a fixed zero offset: it names no place
    ("GMT", "Etc/GMT"),
    ("GMT0", "Etc/GMT"),
    ("GMT+0", "Etc/GMT"),
    ("GMT-0", "Etc/GMT"),
    ("Greenwich", "Etc/GMT"),
    ("Etc/GMT+5", "Etc/GMT+5"),
    ("Etc/GMT-1", "Etc/GMT-1"),
    # country aliases without a '/' are places
    ("GB", "Europe/London"),
    ("GB-Eire", "Europe/London"),
    ("NZ-CHAT", "Pacific/Chatham"),
    ("PRC", "Asia/Shanghai"),
    ("ROC", "Asia/Taipei"),
    ("ROK", "Asia/Seoul"),
    ("W-SU", "Europe/Moscow"),
    ("Cuba", "America/Havana"),
    ("Navajo", "America/Denver"),
    ("Jamaica", "America/Jamaica"),
    # what the legacy names point at is fine when named directly
    ("America/Panama", "America/Panama"),
    ("US/Hawaii", "Pacific/Honolulu"),
    ("US/Pacific", "America/Los_Angeles"),
]


@pytest.mark.parametrize(("name", "canonical"), KEPT, ids=[n for n, _ in KEPT])
def test_other_names_without_a_region_are_kept_or_canonicalised(name: str, canonical: str) -> None:
    assert canonical_timezone(name) == canonical


def test_every_name_without_a_slash_is_legacy_utc_gmt_or_a_place() -> None:
    """Guards the derivation: no other tzdata name is refused, none maps to a surprise."""
    zones, links = _tzdata_tables()
    for name in sorted(n for n in zones | links.keys() if "/" not in n):
        if name in legacy_names():
            continue
        if name == "Factory":
            continue
        target = canonical_timezone(name)
        assert target in {"UTC", "Etc/GMT"} or "/" in target, (name, target)
