"""Nominal occurrences for ``ql audit``, computed independently of the scheduler's schedules.

Interval and one-shot schedules (``every 1m30s from 2026-12-01T00:00:00Z``, ``at
2026-12-24T10:00:00Z``; see ``docs/controls/triggers.md``) are expanded by plain arithmetic
on their stored text (``audit/interval_expansion.py``): ``anchor + k * every`` for k >= 0, or
the one instant; neither reads a time zone. Cron expressions are expanded independently of
``qinglong.domain.cron``.

The audit recomputes, for a window, every occurrence a trigger should have fired and compares
it with the Runs in the database. So that it cannot share the scheduler's bugs, this module
implements the documented rules (``docs/reference/cron.md``) with different code:

* Field matching on *naive* local wall times is done by ``croniter`` (the scheduler uses
  ``cronsim``). croniter with naive datetimes matches fields only; it knows nothing of zones.
* The day-of-month/day-of-week rule is applied here, not by croniter: the two day fields are
  ANDed when either starts with ``*`` and ORed otherwise. An OR expression is expanded as the
  union of one expression with day-of-week replaced by ``*`` and one with day-of-month
  replaced by ``*``, so croniter is only asked to AND (``day_or=False``). (croniter's own OR
  decides from the *expanded* fields and intersects the day-of-month side with ``#`` items.)
  A day field is also split into groups of items one matcher takes together (croniter
  refuses ``#`` items listed with plain ones), and the expansion is the union of the groups.
* Wall times are mapped to instants here: both ``fold`` readings of a wall time are converted
  to UTC and an instant is kept only if converting it back yields the same wall time, so a
  wall time in a spring-forward gap has no instant and one in a fall-back overlap has two.
  A *wall-clock* expression (second [6 fields only], minute and hour fields none starting
  with ``*``) fires by the trigger's DST policy: at the earliest instant of each matching
  wall time (overlap ``first``, the default), the latest (``second``) or every one
  (``both``); a gap time fires at the instant of the first wall time that exists after the
  gap (gap ``shift``, the default), found by scanning forward a minute, then a second, at a
  time, or not at all (``skip``). Every other expression is an *interval* expression and
  fires at every instant of each matching wall time, whatever the policy.

Zone *data* is shared with the scheduler on purpose: :func:`qinglong.domain.timezones.zone_info`.

Limits and corrections:

* croniter cannot parse ``LW`` (last weekday) in day-of-month or ``nL`` (``5L``: the last
  Friday) in day-of-week. The items of a day field that use them are iterated with
  ``cronsim`` instead, the scheduler's own field matcher, so for those two forms the audit is
  independent of the scheduler only in its day rule and DST mapping. (A cronsim group that
  must be ANDed with a day field not starting with ``*`` is intersected here, because
  cronsim would OR it.)
* croniter departs from the documented field meanings in two places, and is handed an
  equivalent spelling: it reads a range with equal ends (``5-5``, ``JAN-JAN``, ``7-7``) as
  the whole field, so it gets the single value; and it ends day-of-week at 6, so ``a/n``
  there (documented range 0-7, 7 being Sunday) becomes ``a-7/n``.
* croniter takes a day-of-month list of 31 entries as the whole field even when one of them
  is ``L`` (``L,1,3/1`` would match the 2nd, which it names nowhere), so ``L`` is always
  matched as a group of its own and the groups are united.
* The naive wall times to iterate are bounded by the UTC offsets in effect during the
  window, sampled every 30 minutes (every window/50,000 for windows over about 3 years). An
  offset in effect for less than one sampling step could be missed; no zone in the tz
  database has one.
* Work is bounded: a window whose expansion could need more than ``MAX_NAIVE_ITERATIONS``
  naive wall times is refused with ValueError before anything is iterated. The bound counts,
  for each group expanded, the matching second/minute/hour combinations per day times the
  days spanned, but never more than one wall time per second (per minute for 5 fields).

The parts: the naive field iteration and the work bound are in ``audit/cron_walls.py``, wall
times and their instants in ``audit/wall_times.py``, interval and one-shot schedules in
``audit/interval_expansion.py``; this module puts them together.
"""

from __future__ import annotations

from datetime import timedelta

from qinglong.audit.cron_walls import (
    MAX_NAIVE_ITERATIONS,
    check_budget,
    day_rule_sources,
    is_wall_clock,
    matching_walls,
    split_fields,
)
from qinglong.audit.interval_expansion import arithmetic_occurrences
from qinglong.audit.wall_times import (
    NAIVE_EPOCH,
    first_instant_after_gap,
    instants_of,
    offset_bounds,
    zone,
)

__all__ = ["MAX_NAIVE_ITERATIONS", "is_wall_clock", "nominal_occurrences"]


def nominal_occurrences(expression: str, timezone: str, start_ms: int, end_ms: int, *,
                        dst_gap: str = "shift", dst_overlap: str = "first") -> list[int]:
    """Every occurrence of ``expression`` in ``timezone`` at or after ``start_ms`` and at or
    before ``end_ms``, as sorted, unique UTC epoch milliseconds (whole seconds).

    ``dst_gap`` (``shift``, ``skip``) and ``dst_overlap`` (``first``, ``second``, ``both``)
    are the trigger's DST policy; they change what a wall-clock expression does with a wall
    time that does not exist (the end of the gap, or nothing) or exists twice (the earlier
    instant, the later one, or both). Interval expressions ignore them.

    Raises ValueError for an expression or zone this module cannot expand and for a window
    that would need more than ``MAX_NAIVE_ITERATIONS`` naive wall times, TypeError for
    arguments of the wrong type."""
    for bound in (start_ms, end_ms):
        if not isinstance(bound, int) or isinstance(bound, bool):
            raise TypeError("start_ms and end_ms must be integers (UTC epoch milliseconds)")
    if isinstance(expression, str) and expression.startswith(("every ", "at ")):
        return arithmetic_occurrences(expression, start_ms, end_ms)
    if dst_gap not in ("shift", "skip") or dst_overlap not in ("first", "second", "both"):
        raise ValueError(f"unknown DST policy: gap {dst_gap!r}, overlap {dst_overlap!r}")
    fields = split_fields(expression)
    tz = zone(timezone)
    first_s = -(-start_ms // 1000)
    last_s = end_ms // 1000
    if first_s > last_s:
        return []
    # A wall time w maps to instants t with w = t + offset(t); a gap time shifted to the
    # instant T lies at or after T + offset(T - 1 s). So every wall time that can yield an
    # instant in [first_s, last_s] lies between these two bounds.
    low_offset, high_offset = offset_bounds(tz, first_s - 1, last_s)
    try:
        first_wall = NAIVE_EPOCH + timedelta(seconds=first_s + low_offset)
        last_wall = NAIVE_EPOCH + timedelta(seconds=last_s + high_offset)
    except OverflowError as exc:
        raise ValueError("the window is outside the supported date range") from exc
    sources = day_rule_sources(fields)
    check_budget(expression, fields, sources, first_wall, last_wall)

    found: set[int] = set()
    for wall in matching_walls(fields, sources, first_wall, last_wall):
        instants = instants_of(wall, tz)
        if not fields.wall_clock:
            fired = instants
        elif not instants:  # in a spring-forward gap
            fired = () if dst_gap == "skip" else (first_instant_after_gap(wall, tz),)
        elif len(instants) == 1:
            fired = instants
        else:  # repeated by a fall-back overlap
            fired = {"first": instants[:1], "second": instants[1:], "both": instants}[dst_overlap]
        found.update(at for at in fired if first_s <= at <= last_s)
    return [at * 1000 for at in sorted(found)]
