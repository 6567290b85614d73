"""normalize_expression: what is accepted, how it is normalised, and what is refused."""

from __future__ import annotations

import pytest

from qinglong.domain.cron import CronSchedule, normalize_expression
from qinglong.errors import InvalidInput, InvalidSchedule

ACCEPTED = [
    # (input, normalised)
    ("0 0 * * *", "0 0 * * *"),
    ("0 0 0 * * *", "0 0 0 * * *"),
    ("*/5 * * * *", "*/5 * * * *"),
    ("*/10 * * * * *", "*/10 * * * * *"),
    ("0-5/2 1,2,3 1-31 1-12 0-7", "0-5/2 1,2,3 1-31 1-12 0-7"),
    # whitespace is collapsed to single spaces and trimmed
    ("  0   0\t* *\n*  ", "0 0 * * *"),
    ("0\t\t30  2 *  * *", "0 30 2 * * *"),
    # names are upper-cased
    ("0 0 * jan mon", "0 0 * JAN MON"),
    ("0 0 * * mon-fri", "0 0 * * MON-FRI"),
    ("0 0 * Jan-Mar Sun", "0 0 * JAN-MAR SUN"),
    ("0 0 * * mon#2", "0 0 * * MON#2"),
    ("0 0 l * *", "0 0 L * *"),
    ("0 0 lw * *", "0 0 LW * *"),
    ("0 0 * * 5l", "0 0 * * 5L"),
    # 7 is Sunday
    ("0 0 * * 7", "0 0 * * 7"),
    # Feb 29 exists in leap years
    ("0 0 29 2 *", "0 0 29 2 *"),
    # OR semantics (neither day field starts with '*'): Feb 30 never exists, Mondays do
    ("0 0 30 2 MON", "0 0 30 2 MON"),
    ("0 0 * * 1#5", "0 0 * * 1#5"),
    # numbers of up to 2 digits, leading zero included
    ("05 00 01 01 00", "05 00 01 01 00"),
    ("*/05 * * * *", "*/05 * * * *"),
    # a step may be as long as the field's cycle (it then selects only its start)
    ("*/60 * * * *", "*/60 * * * *"),
    ("0 0 1-31/31 * *", "0 0 1-31/31 * *"),
    ("0 0 * JAN-DEC/12 MON-FRI/7", "0 0 * JAN-DEC/12 MON-FRI/7"),
]


@pytest.mark.parametrize(("text", "normalized"), ACCEPTED, ids=[repr(t) for t, _ in ACCEPTED])
def test_accepted_expressions_are_normalised(text: str, normalized: str) -> None:
    assert normalize_expression(text) == normalized
    # idempotent
    assert normalize_expression(normalized) == normalized
    assert CronSchedule.parse(text, "UTC").expression == normalized


def test_equivalent_spellings_are_the_same_schedule() -> None:
    a = CronSchedule.parse("0  0 * * mon", "UTC")
    b = CronSchedule.parse("0 0 * * MON", "UTC")
    assert a == b


REFUSED = [
    # (input, a fragment of the message)
    # field counts
    ("", "got 0"),
    ("   ", "got 0"),
    ("*", "got 1"),
    ("0 0 * *", "got 4"),
    ("0 0 0 * * * *", "got 7"),
    ("0 0 * * * 2026 x", "got 7"),
    # macros
    ("@daily", "macros such as @daily are not supported"),
    ("@hourly", "macros"),
    ("@reboot", "macros"),
    ("  @weekly", "macros"),
    # characters
    ("0 0 ? * *", "may only use digits, names"),
    ("1.5 * * * *", "may only use digits, names"),
    ("0 0 * * * ;", "may only use digits, names"),
    ("0 0 * * $(reboot)", "may only use digits, names"),
    ("0 0 * * MON|TUE", "may only use digits, names"),
    # out of range
    ("60 * * * *", "the minute field"),
    ("* 24 * * *", "the hour field"),
    ("60 * * * * *", "the second field"),
    ("0 0 0 * *", "the day-of-month field"),
    ("0 0 32 * *", "the day-of-month field"),
    ("0 0 * 0 *", "the month field"),
    ("0 0 * 13 *", "the month field"),
    ("0 0 * * 8", "the day-of-week field"),
    ("-1 * * * *", "the minute field"),
    # malformed ranges, steps and names
    ("5-1 * * * *", "the minute field"),
    ("*/0 * * * *", "the minute field"),
    ("*/ * * * *", "the minute field"),
    ("0 0 * * FRI-MON", "the day-of-week field"),
    ("0 0 * FOO *", "the month field"),
    ("0 0 * * MONDAY", "the day-of-week field"),
    ("0 0 * * JAN", "the day-of-week field"),
    ("0 0 * MON *", "the month field"),
    ("0 0 H * *", "the day-of-month field"),
    ("0 0 1W * *", "the day-of-month field"),
    ("0 0 * * L", "the day-of-week field"),
    ("0 0 * * MON#6", "the day-of-week field"),
    ("0 0 * * MON#0", "the day-of-week field"),
    ("0 0 * * 1#", "the day-of-week field"),
    ("1#2 * * * *", "the minute field"),
    # steps longer than the field's cycle, in every field and every kind of term
    ("*/99999999999999999999 * * * * *",
     "the second field '*/99999999999999999999': the step must be between 1 and 60"),
    ("*/99999999999999999999 * * * *",
     "the minute field '*/99999999999999999999': the step must be between 1 and 60"),
    ("0 0-23/99999999999999999999 * * *",
     "the hour field '0-23/99999999999999999999': the step must be between 1 and 24"),
    ("0 0 1-31/99999999999999999999 * *",
     "the day-of-month field '1-31/99999999999999999999': the step must be between 1 and 31"),
    ("0 0 L/99999999999999999999 * *", "the day-of-month field 'L/99999999999999999999': the step"),
    ("0 0 LW/32 * *", "the day-of-month field 'LW/32': the step must be between 1 and 31"),
    ("0 0 * JAN-DEC/99999999999999999999 *",
     "the month field 'JAN-DEC/99999999999999999999': the step must be between 1 and 12"),
    ("0 0 * 1/99999999999999999999 *", "the month field '1/99999999999999999999': the step"),
    ("0 0 * * MON-FRI/99999999999999999999",
     "the day-of-week field 'MON-FRI/99999999999999999999': the step must be between 1 and 7"),
    ("0 0 * * 1,2/99999999999999999999", "the day-of-week field '1,2/99999999999999999999'"),
    ("0 */0 * * *", "the step must be between 1 and 24 (got 0)"),
    ("0 0 * * */00", "the step must be between 1 and 7 (got 00)"),
    # values and week numbers beyond the field, however many digits
    ("99999999999999999999 * * * * *",
     "the second field '99999999999999999999': a value must be between 0 and 59"),
    ("0,15,30,60 * * * *", "the minute field '0,15,30,60': a value must be between 0 and 59"),
    ("0 24 * * *", "the hour field '24': a value must be between 0 and 23 (got 24)"),
    ("0 0 99999999999999999999 * *",
     "the day-of-month field '99999999999999999999': a value must be between 1 and 31"),
    ("0 0 1-99999999999999999999 * *", "a value must be between 1 and 31"),
    ("0 0 * 99999999999999999999 *",
     "the month field '99999999999999999999': a value must be between 1 and 12 or a name JAN-DEC"),
    ("0 0 * * 99999999999999999999",
     "the day-of-week field '99999999999999999999': a value must be between 0 and 7 or a name"),
    ("0 0 * * 99999999999999999999L", "the day-of-week field '99999999999999999999L': a value"),
    ("0 0 * * 8#1", "the day-of-week field '8#1': a value must be between 0 and 7"),
    ("0 0 * * MON#99999999999999999999",
     "the day-of-week field 'MON#99999999999999999999': the week number after # must be"),
    # digit strings longer than any number a field holds, even when their value fits
    ("0000000000000000000001 * * * * *",
     "the number '0000000000000000000001' has too many digits; write numbers with at most 2"),
    ("0000000000000000000001 * * * *", "the minute field '0000000000000000000001': the number"),
    ("000 * * * *", "the minute field '000': the number '000' has too many digits"),
    ("0 0-0000000000000000000023 * * *", "the hour field '0-0000000000000000000023': the number"),
    ("0 0 0000000000000000000001 * *",
     "the day-of-month field '0000000000000000000001': the number"),
    ("0 0 * 0000000000000000000012 *", "the month field '0000000000000000000012': the number"),
    ("0 0 * * 0000000000000000000005L",
     "the day-of-week field '0000000000000000000005L': the number"),
    ("0 0 * * 1#0000000000000000000002",
     "the day-of-week field '1#0000000000000000000002': the number '0000000000000000000002'"),
    ("*/0000000000000000000005 * * * *", "the minute field '*/0000000000000000000005': the number"),
    # dates that never exist (AND semantics because a day field starts with '*')
    ("0 0 30 2 *", "could never fire"),
    ("0 0 31 2 *", "could never fire"),
    ("0 0 31 4,6,9,11 *", "could never fire"),
    ("0 0 30-31 FEB *", "could never fire"),
]


@pytest.mark.parametrize(("text", "fragment"), REFUSED, ids=[repr(t) for t, _ in REFUSED])
def test_refused_expressions_raise_invalid_schedule_on_the_cron_field(
    text: str, fragment: str
) -> None:
    with pytest.raises(InvalidSchedule) as info:
        normalize_expression(text)
    error = info.value
    assert error.field == "cron"
    assert fragment in error.rule
    assert isinstance(error, InvalidInput)
    assert error.code == "QL_INVALID_SCHEDULE"
    # CronSchedule.parse refuses the same input the same way
    with pytest.raises(InvalidSchedule) as again:
        CronSchedule.parse(text, "UTC")
    assert again.value.field == "cron"


def test_the_macro_message_shows_how_to_write_the_fields() -> None:
    with pytest.raises(InvalidSchedule) as info:
        normalize_expression("@daily")
    assert "'0 0 * * *'" in info.value.rule


def test_parse_errors_name_the_normalised_expression() -> None:
    with pytest.raises(InvalidSchedule) as info:
        normalize_expression("0  0 * foo   *")
    assert "'0 0 * FOO *'" in info.value.rule


@pytest.mark.parametrize(
    "value", [None, 5, 1.0, b"0 0 * * *", ["0", "0", "*", "*", "*"]], ids=repr
)
def test_non_strings_are_refused(value: object) -> None:
    with pytest.raises(InvalidSchedule) as info:
        normalize_expression(value)  # type: ignore[arg-type]
    assert info.value.field == "cron"
    assert "must be a string" in info.value.rule


def test_the_length_limit_is_512_characters_of_input() -> None:
    padded = "0 0 * * *" + " " * (512 - len("0 0 * * *"))
    assert len(padded) == 512
    assert normalize_expression(padded) == "0 0 * * *"
    with pytest.raises(InvalidSchedule) as info:
        normalize_expression(padded + " ")
    assert info.value.field == "cron"
    assert "at most 512 characters" in info.value.rule


def test_a_field_may_be_at_most_128_characters() -> None:
    # "0,1,...,45" is 10 one-digit + 36 two-digit numbers + 45 commas = 127 characters.
    ok = ",".join(str(m) for m in range(46))
    assert len(ok) == 127
    assert normalize_expression(f"{ok} * * * *") == f"{ok} * * * *"
    too_long = ",".join(str(m) for m in range(47))
    assert len(too_long) == 130
    with pytest.raises(InvalidSchedule) as info:
        normalize_expression(f"{too_long} * * * *")
    assert info.value.field == "cron"


# (field, expression with {} where the number goes, lowest, highest value, longest step)
FIELD_LIMITS = [
    ("second", "{} * * * * *", 0, 59, 60),
    ("minute", "{} * * * *", 0, 59, 60),
    ("hour", "0 {} * * *", 0, 23, 24),
    ("day-of-month", "0 0 {} * *", 1, 31, 31),
    ("month", "0 0 1 {} *", 1, 12, 12),
    ("day-of-week", "0 0 * * {}", 0, 7, 7),
]


@pytest.mark.parametrize(
    ("name", "template", "low", "high", "longest"), FIELD_LIMITS, ids=[f[0] for f in FIELD_LIMITS]
)
def test_a_step_may_be_the_fields_cycle_but_not_one_more(
    name: str, template: str, low: int, high: int, longest: int
) -> None:
    for start in ("*", f"{low}", f"{low}-{high}"):
        at_limit = template.format(f"{start}/{longest}")
        assert normalize_expression(at_limit) == at_limit
        above = template.format(f"{start}/{longest + 1}")
        with pytest.raises(InvalidSchedule) as info:
            normalize_expression(above)
        assert info.value.field == "cron"
        assert info.value.rule == (
            f"the {name} field '{start}/{longest + 1}': "
            f"the step must be between 1 and {longest} (got {longest + 1})"
        )


@pytest.mark.parametrize(
    ("name", "template", "low", "high", "longest"), FIELD_LIMITS, ids=[f[0] for f in FIELD_LIMITS]
)
def test_values_run_from_the_fields_lowest_to_its_highest(
    name: str, template: str, low: int, high: int, longest: int
) -> None:
    for value in (low, high, f"{low}-{high}", f"{low:02d}"):
        expression = template.format(value)
        assert normalize_expression(expression) == expression
    for value in (low - 1, high + 1):
        if value < 0:
            continue  # '-1' is a malformed range, refused by the range rules
        with pytest.raises(InvalidSchedule) as info:
            normalize_expression(template.format(value))
        assert info.value.rule.startswith(
            f"the {name} field '{value}': a value must be between {low} and {high}"
        )


def test_the_week_number_after_hash_runs_from_1_to_5() -> None:
    assert normalize_expression("0 0 * * 1#1,5#5") == "0 0 * * 1#1,5#5"
    for nth in (0, 6, 99):
        with pytest.raises(InvalidSchedule) as info:
            normalize_expression(f"0 0 * * FRI#{nth}")
        assert info.value.rule == (
            f"the day-of-week field 'FRI#{nth}': "
            f"the week number after # must be between 1 and 5 (got {nth})"
        )


def test_a_huge_number_is_refused_before_it_reaches_cronsim() -> None:
    """A field of the longest allowed length, all one number: the refusal is ours."""
    for prefix, template in (("1/", "0 0 {} * *"), ("", "{} * * * *"), ("MON#", "0 0 * * {}")):
        digits = "9" * (128 - len(prefix))
        with pytest.raises(InvalidSchedule) as info:
            normalize_expression(template.format(prefix + digits))
        assert info.value.rule.endswith(f"(got {digits})")
        assert info.value.__cause__ is None
