"""Cron expression text: validation and normalisation (`normalize_expression`), and whether
an expression is *wall-clock* (`is_wall_clock`). The rules, with the DST rules they lead to,
are in the docstring of ``domain/cron.py`` and in ``docs/reference/cron.md``."""

from __future__ import annotations

import re
from datetime import datetime

from cronsim import CronSim, CronSimError

from qinglong.errors import InvalidSchedule

FIELD_CHARS = re.compile(r"[0-9A-Za-z*,/#-]+")
MAX_FIELD_LENGTH = 128
MAX_EXPRESSION_LENGTH = 512
MAX_NUMBER_DIGITS = 2


def normalize_expression(expression: str) -> str:
    """Validate a cron expression and return it with single spaces and upper-case names."""
    if not isinstance(expression, str):
        raise InvalidSchedule("cron", "must be a string")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise InvalidSchedule("cron", f"must be at most {MAX_EXPRESSION_LENGTH} characters")
    text = expression.strip()
    if text.startswith("@"):
        raise InvalidSchedule(
            "cron", "macros such as @daily are not supported; write the fields, e.g. '0 0 * * *'"
        )
    fields = text.split()
    if len(fields) not in (5, 6):
        raise InvalidSchedule(
            "cron", f"must have 5 fields (or 6 with seconds first), got {len(fields)}"
        )
    for field in fields:
        if len(field) > MAX_FIELD_LENGTH:
            raise InvalidSchedule("cron", f"each field must be at most {MAX_FIELD_LENGTH} characters")
        if not FIELD_CHARS.fullmatch(field):
            raise InvalidSchedule(
                "cron", f"field {field!r} may only use digits, names and the characters * , / # L -"
            )
    names = _FIELD_NAMES if len(fields) == 6 else _FIELD_NAMES[1:]
    for name, field in zip(names, fields, strict=True):
        _check_numbers(name, field.upper())
    normalized = " ".join(_collapse_equal_ranges(field.upper()) for field in fields)
    try:
        CronSim(normalized, datetime(2000, 1, 1))
    except CronSimError as exc:
        raise InvalidSchedule("cron", _explain(normalized, str(exc))) from exc
    except (ValueError, IndexError) as exc:
        raise InvalidSchedule("cron", f"cannot be parsed: {normalized!r}") from exc
    return normalized


_FIELD_NAMES = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
_FIELD_RULES = {
    "second": "0-59", "minute": "0-59", "hour": "0-23",
    "day-of-month": "1-31, L or LW", "month": "1-12 or JAN-DEC",
    "day-of-week": "0-7 or SUN-SAT, with n#k (k 1-5) or nL",
}


def _explain(normalized: str, error: str) -> str:
    """Name the field, what it may hold, and a day that no month given can have."""
    fields = normalized.split()
    names = _FIELD_NAMES if len(fields) == 6 else _FIELD_NAMES[1:]
    name = error.removeprefix("Bad ").strip()
    if name not in names:
        return f"{error} in {normalized!r}"
    field = fields[names.index(name)]
    if name == "day-of-month":
        with_any_month = fields.copy()
        with_any_month[names.index("month")] = "*"
        try:
            CronSim(" ".join(with_any_month), datetime(2000, 1, 1))
        except CronSimError:
            pass
        else:
            month = fields[names.index("month")]
            return (f"day-of-month {field!r} never occurs in month {month!r}: "
                    f"{normalized!r} could never fire")
    step = "; a step must be at least 1" if "/" in field else ""
    ranges = "; a range must go upwards" if "-" in field else ""
    return (f"the {name} field {field!r} is not valid in {normalized!r}: "
            f"use {_FIELD_RULES[name]}, lists, ranges and steps{step}{ranges}")


# Per field: the lowest and highest value, and the longest useful step (the cycle length).
_FIELD_LIMITS = {
    "second": (0, 59, 60), "minute": (0, 59, 60), "hour": (0, 23, 24),
    "day-of-month": (1, 31, 31), "month": (1, 12, 12), "day-of-week": (0, 7, 7),
}
_VALUE_NAMES = {"month": " or a name JAN-DEC", "day-of-week": " or a name SUN-SAT"}
_NTH_LIMITS = (1, 5)  # MON#k: the k-th such weekday of the month
_NUMBER = re.compile(r"[0-9]+")


def _check_numbers(name: str, field: str) -> None:
    """Refuse a number outside what its place in ``field`` can hold (see ``domain/cron.py``).

    A number right after ``/`` is a step, one right after ``#`` in day-of-week is a week
    number, and every other number is a value. Structure (range order, stray characters,
    names) is left to cronsim; this only bounds the numbers.
    """
    low, high, longest_step = _FIELD_LIMITS[name]
    for match in _NUMBER.finditer(field):
        digits = match.group()
        number = int(digits)  # at most MAX_FIELD_LENGTH digits: cheap and exact
        before = field[match.start() - 1] if match.start() else ""
        if before == "/":
            if not 1 <= number <= longest_step:
                raise InvalidSchedule(
                    "cron",
                    f"the {name} field {field!r}: the step must be between 1 and {longest_step}"
                    f" (got {digits})",
                )
        elif before == "#" and name == "day-of-week":
            if not _NTH_LIMITS[0] <= number <= _NTH_LIMITS[1]:
                raise InvalidSchedule(
                    "cron",
                    f"the {name} field {field!r}: the week number after # must be between "
                    f"{_NTH_LIMITS[0]} and {_NTH_LIMITS[1]} (got {digits})",
                )
        elif not low <= number <= high:
            raise InvalidSchedule(
                "cron",
                f"the {name} field {field!r}: a value must be between {low} and {high}"
                f"{_VALUE_NAMES.get(name, '')} (got {digits})",
            )
        if len(digits) > MAX_NUMBER_DIGITS:
            raise InvalidSchedule(
                "cron",
                f"the {name} field {field!r}: the number {digits!r} has too many digits;"
                f" write numbers with at most {MAX_NUMBER_DIGITS} digits",
            )


_EQUAL_RANGE_STEP = re.compile(r"^([0-9A-Z]+)-\1/\d+$")


def _collapse_equal_ranges(field: str) -> str:
    """``a-a/n`` means just ``a``; cronsim would read it as ``a/n`` (``a`` to the end)."""
    return ",".join(
        term.split("-", 1)[0] if _EQUAL_RANGE_STEP.fullmatch(term) else term
        for term in field.split(",")
    )


def is_wall_clock(expression: str) -> bool:
    """True when second, minute and hour fields name fixed values (see ``domain/cron.py``)."""
    fields = expression.split()
    time_fields = fields[:3] if len(fields) == 6 else fields[:2]
    return not any(field.startswith("*") for field in time_fields)

