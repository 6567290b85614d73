"""IANA time zone validation and alias canonicalisation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, available_timezones

import pytest

from qinglong.domain.cron import CronSchedule
from qinglong.domain.timezones import canonical_timezone
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
        if name in {"localtime", "posixrules", "Factory"}:
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
