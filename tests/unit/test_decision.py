"""The scheduling decision: a table of cases, then properties over a simulated scheduler.

Notation (as in the module docstring): ``c`` the cursor, ``t`` the observation time, ``g`` the
grace. All occurrence sources are real CronSchedules.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qinglong.domain.cron import CronSchedule
from qinglong.domain.decision import (
    MAX_GRACE_MS,
    MIN_GRACE_MS,
    Decision,
    Disposition,
    check_grace,
    decide,
)
from qinglong.domain.trigger import MisfirePolicy
from qinglong.errors import InvalidInput

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MS = timedelta(milliseconds=1)
SKIP = MisfirePolicy.SKIP
ONCE = MisfirePolicy.FIRE_ONCE
INIT, ADMIT, SKIPPED = Disposition.INITIALIZE, Disposition.ADMIT, Disposition.SKIP

HOURLY = CronSchedule.parse("0 * * * *", "UTC")
EVERY_SECOND = CronSchedule.parse("* * * * * *", "UTC")


def at(clock: str) -> int:
    """``11:00:00.001`` on 2026-01-01 UTC -> epoch milliseconds."""
    moment = datetime.fromisoformat(f"2026-01-01T{clock}+00:00")
    return (moment - EPOCH) // MS


def _t(value: str | None) -> int | None:
    return None if value is None else at(value)


@dataclass(frozen=True)
class Case:
    id: str
    source: CronSchedule
    cursor: str | None
    published: str
    observed: str
    grace: int
    policy: MisfirePolicy
    disposition: Disposition
    due: str
    next_fire: str
    scheduled: str | None
    misfired: bool
    skipped_through: str | None  # t - g; the decision drops the stretch before it


CASES = [
    # cursor NULL: the first occurrence at or after the publish time
    Case("null-cursor-first-occurrence-in-future-initializes", HOURLY, None, "10:20:00",
         "10:30:00", 60_000, SKIP, INIT, "11:00:00", "11:00:00", None, False, None),
    Case("null-cursor-published-exactly-on-an-occurrence-includes-it", HOURLY, None, "11:00:00",
         "11:00:30", 60_000, SKIP, ADMIT, "11:00:00", "12:00:00", "11:00:00", False, None),
    Case("null-cursor-published-1ms-after-an-occurrence-excludes-it", HOURLY, None,
         "11:00:00.001", "11:00:30", 60_000, SKIP, INIT, "12:00:00", "12:00:00", None, False,
         None),
    Case("null-cursor-observed-exactly-at-first-occurrence-admits", HOURLY, None, "10:20:00",
         "11:00:00", 60_000, SKIP, ADMIT, "11:00:00", "12:00:00", "11:00:00", False, None),
    Case("null-cursor-first-occurrence-already-misfired", HOURLY, None, "10:20:00", "11:05:00",
         60_000, SKIP, SKIPPED, "11:00:00", "12:00:00", None, True, "11:04:00"),
    # on time: admit c, next cursor is the first occurrence after c
    Case("on-time-at-the-occurrence", HOURLY, "11:00:00", "09:00:00", "11:00:00", 60_000, SKIP,
         ADMIT, "11:00:00", "12:00:00", "11:00:00", False, None),
    Case("on-time-1ms-inside-grace", HOURLY, "11:00:00", "09:00:00", "11:00:59.999", 60_000,
         SKIP, ADMIT, "11:00:00", "12:00:00", "11:00:00", False, None),
    Case("on-time-exactly-at-the-grace", HOURLY, "11:00:00", "09:00:00", "11:01:00", 60_000,
         SKIP, ADMIT, "11:00:00", "12:00:00", "11:00:00", False, None),
    Case("on-time-exactly-at-the-grace-fire-once", HOURLY, "11:00:00", "09:00:00", "11:01:00",
         60_000, ONCE, ADMIT, "11:00:00", "12:00:00", "11:00:00", False, None),
    # next cursor after c (10:00:01), not after t (10:00:05): on-time backlog is not dropped
    Case("on-time-next-cursor-is-after-c-not-after-t", EVERY_SECOND, "10:00:00", "09:00:00",
         "10:00:04", 5_000, SKIP, ADMIT, "10:00:00", "10:00:01", "10:00:00", False, None),
    Case("grace-zero-exactly-on-time", EVERY_SECOND, "10:00:00", "09:00:00", "10:00:00", 0,
         SKIP, ADMIT, "10:00:00", "10:00:01", "10:00:00", False, None),
    Case("grace-max-exactly-at-the-grace", HOURLY, "11:00:00", "09:00:00", "11:05:00",
         300_000, SKIP, ADMIT, "11:00:00", "12:00:00", "11:00:00", False, None),
    # misfired: skip admits nothing, fire_once admits c; next cursor is the first after t - g
    Case("misfire-1ms-beyond-grace-skip", HOURLY, "11:00:00", "09:00:00", "11:01:00.001",
         60_000, SKIP, SKIPPED, "11:00:00", "12:00:00", None, True, "11:00:00.001"),
    Case("misfire-1ms-beyond-grace-fire-once", HOURLY, "11:00:00", "09:00:00", "11:01:00.001",
         60_000, ONCE, ADMIT, "11:00:00", "12:00:00", "11:00:00", True, "11:00:00.001"),
    Case("misfire-grace-zero-1ms-late", EVERY_SECOND, "10:00:00", "09:00:00", "10:00:00.001",
         0, SKIP, SKIPPED, "10:00:00", "10:00:01", None, True, "10:00:00.001"),
    # hours of backlog: the next cursor is 14:00 (after t - g = 13:29), not 12:00 (after c)
    Case("misfire-backlog-is-not-replayed-skip", HOURLY, "11:00:00", "09:00:00", "13:30:00",
         60_000, SKIP, SKIPPED, "11:00:00", "14:00:00", None, True, "13:29:00"),
    Case("misfire-backlog-is-not-replayed-fire-once", HOURLY, "11:00:00", "09:00:00",
         "13:30:00", 60_000, ONCE, ADMIT, "11:00:00", "14:00:00", "11:00:00", True, "13:29:00"),
    # t - g = 10:00:05.500: the next cursor is 10:00:06 (10:00:06 is 4.5 s late, inside grace)
    Case("misfire-resumes-inside-the-grace-window", EVERY_SECOND, "10:00:00", "09:00:00",
         "10:00:10.500", 5_000, SKIP, SKIPPED, "10:00:00", "10:00:06", None, True,
         "10:00:05.500"),
    Case("misfire-resumes-inside-the-grace-window-fire-once", EVERY_SECOND, "10:00:00",
         "09:00:00", "10:00:10.500", 5_000, ONCE, ADMIT, "10:00:00", "10:00:06", "10:00:00",
         True, "10:00:05.500"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_decide_table(case: Case) -> None:
    decision = decide(
        cursor_ms=_t(case.cursor),
        published_at_ms=at(case.published),
        observed_at_ms=at(case.observed),
        grace_ms=case.grace,
        policy=case.policy,
        occurrences=case.source,
    )
    assert decision == Decision(
        disposition=case.disposition,
        observed_at_ms=at(case.observed),
        due_at_ms=at(case.due),
        next_fire_at_ms=at(case.next_fire),
        scheduled_for_ms=_t(case.scheduled),
        misfired=case.misfired,
        skipped_through_ms=None if case.skipped_through is None else at(case.skipped_through) - 1,
    )


@pytest.mark.parametrize("observed", ["10:59:59.999", "10:00:00", "00:00:00"])
@pytest.mark.parametrize("policy", [SKIP, ONCE])
def test_a_cursor_that_is_not_due_raises(observed: str, policy: MisfirePolicy) -> None:
    with pytest.raises(InvalidInput) as info:
        decide(
            cursor_ms=at("11:00:00"),
            published_at_ms=at("09:00:00"),
            observed_at_ms=at(observed),
            grace_ms=60_000,
            policy=policy,
            occurrences=HOURLY,
        )
    assert info.value.field == "cursor"


@pytest.mark.parametrize("grace", [MIN_GRACE_MS, 1, 59_999, MAX_GRACE_MS])
def test_grace_within_bounds_is_accepted(grace: int) -> None:
    assert (MIN_GRACE_MS, MAX_GRACE_MS) == (0, 300_000)
    assert check_grace(grace) == grace


@pytest.mark.parametrize(
    "grace", [-1, 300_001, 10**9, True, False, 1.0, "100", None], ids=repr
)
def test_grace_outside_bounds_or_not_an_int_is_refused(grace: object) -> None:
    with pytest.raises(InvalidInput) as info:
        check_grace(grace)  # type: ignore[arg-type]
    assert info.value.field == "grace"
    with pytest.raises(InvalidInput) as again:
        decide(
            cursor_ms=at("11:00:00"),
            published_at_ms=at("09:00:00"),
            observed_at_ms=at("11:00:00"),
            grace_ms=grace,  # type: ignore[arg-type]
            policy=SKIP,
            occurrences=HOURLY,
        )
    assert again.value.field == "grace"


@pytest.mark.parametrize(
    ("grace", "observed", "on_time_occurrence"),
    [(0, "10:00:01", "10:00:01"), (1_000, "10:00:03", "10:00:02"), (5_000, "10:00:10", "10:00:05")],
    ids=["grace-0", "grace-1s", "grace-5s"],
)
def test_an_occurrence_exactly_grace_late_survives_a_misfire(
    grace: int, observed: str, on_time_occurrence: str
) -> None:
    # The cursor 10:00:00 is more than g late at t, so this decision misfires. The occurrence
    # t - g is exactly g late: had the cursor already been there, decide() would admit it.
    as_cursor = decide(
        cursor_ms=at(on_time_occurrence),
        published_at_ms=at("09:00:00"),
        observed_at_ms=at(observed),
        grace_ms=grace,
        policy=SKIP,
        occurrences=EVERY_SECOND,
    )
    assert as_cursor.disposition is ADMIT and not as_cursor.misfired  # on time by the rule
    misfire = decide(
        cursor_ms=at("10:00:00"),
        published_at_ms=at("09:00:00"),
        observed_at_ms=at(observed),
        grace_ms=grace,
        policy=SKIP,
        occurrences=EVERY_SECOND,
    )
    assert misfire.misfired
    assert misfire.next_fire_at_ms == at(on_time_occurrence)


# --- properties over a simulated scheduler ------------------------------------------------
#
# The simulation: a schedule whose occurrences are every P ms of real time (P = 1000 or
# 5000; per-second and per-5-second expressions, so the occurrences are known without asking
# the code), a publish time p, and strictly increasing observation times t_0 < t_1 < ...
# At each t_i the scheduler calls decide() while the row is due (cursor NULL or cursor <= t_i)
# and stores the returned next_fire_at_ms as the cursor.
#
# For an occurrence o >= p with o <= t_last, let T(o) be the first observation time >= o (the
# observation at which o was first due) and lateness(o) = T(o) - o.


@dataclass(frozen=True)
class Simulation:
    period: int
    published: int
    observations: list[int]
    grace: int
    policy: MisfirePolicy
    decisions: list[Decision]
    final_cursor: int

    @property
    def admitted(self) -> list[int]:
        return [d.scheduled_for_ms for d in self.decisions if d.scheduled_for_ms is not None]

    def occurrences(self) -> list[int]:
        """Every occurrence in [p, t_last], computed from the period alone."""
        first = -(-self.published // self.period) * self.period
        return list(range(first, self.observations[-1] + 1, self.period))

    def first_due(self, occurrence: int) -> int:
        return next(t for t in self.observations if t >= occurrence)


def simulate(
    source: CronSchedule,
    period: int,
    published: int,
    observations: list[int],
    grace: int,
    policy: MisfirePolicy,
) -> Simulation:
    cursor: int | None = None
    decisions: list[Decision] = []
    for t in observations:
        while cursor is None or cursor <= t:
            decision = decide(
                cursor_ms=cursor,
                published_at_ms=published,
                observed_at_ms=t,
                grace_ms=grace,
                policy=policy,
                occurrences=source,
            )
            if cursor is not None:
                assert decision.due_at_ms == cursor
            decisions.append(decision)
            cursor = decision.next_fire_at_ms
            assert len(decisions) < 20_000, "the simulation does not converge"
    assert cursor is not None
    return Simulation(period, published, observations, grace, policy, decisions, cursor)


SCHEDULES = [("* * * * * *", 1000), ("*/5 * * * * *", 5000)]
# (zone, start): per-second and per-5-second schedules are interval expressions, so every real
# second (every fifth) occurs, including across New York's spring-forward and fall-back hours.
STARTS = [
    ("UTC", at("10:00:00")),
    ("Asia/Shanghai", at("10:00:00")),
    ("America/New_York", (datetime(2026, 3, 8, 6, 58, tzinfo=UTC) - EPOCH) // MS),
    ("America/New_York", (datetime(2026, 11, 1, 5, 58, tzinfo=UTC) - EPOCH) // MS),
]


@st.composite
def simulations(draw: st.DrawFn) -> Simulation:
    expr, period = draw(st.sampled_from(SCHEDULES))
    zone, start = draw(st.sampled_from(STARTS))
    grace = draw(st.one_of(st.sampled_from([0, 1_000, 2_000, 5_000]), st.integers(0, 15_000)))
    policy = draw(st.sampled_from([SKIP, ONCE]))
    published = start + draw(st.one_of(st.integers(0, 10_000), st.sampled_from([0, 1000, 5000])))
    first = published + draw(st.integers(0, 8_000))
    gaps = draw(
        st.lists(
            st.one_of(
                st.integers(1, 2_500),  # frequent observations: everything on time
                st.integers(1, 40_000),  # some gaps longer than the grace
                st.sampled_from([1_000, 5_000, 10_000]),  # round gaps hit the boundaries
            ),
            min_size=0,
            max_size=25,
        )
    )
    observations = [first]
    for gap in gaps:
        observations.append(observations[-1] + gap)
    source = CronSchedule.parse(expr, zone)
    return simulate(source, period, published, observations, grace, policy)


@settings(max_examples=250)
@given(sim=simulations())
def test_simulated_scheduler_properties(sim: Simulation) -> None:
    decisions = sim.decisions
    admitted = sim.admitted
    occurrences = sim.occurrences()

    # Only the very first decision may initialize, and only if p's first occurrence is > t_0.
    for index, d in enumerate(decisions):
        assert (d.disposition is INIT) == (index == 0 and d.due_at_ms > sim.observations[0])

    # (a) the cursor strictly increases with every decision, and is always an occurrence.
    cursors = [d.next_fire_at_ms for d in decisions]
    for d in decisions:
        if d.disposition is not INIT:
            assert d.next_fire_at_ms > d.due_at_ms
    assert all(a < b for a, b in pairwise(cursors)), cursors
    assert all(c % sim.period == 0 for c in cursors)
    assert sim.final_cursor > sim.observations[-1]

    # (b) no occurrence is admitted twice, and (e) admissions are in increasing order;
    # every admitted value is an occurrence of the schedule at or after p.
    assert all(a < b for a, b in pairwise(admitted)), admitted
    assert set(admitted) <= set(occurrences)

    # (d) a misfire decision at t covers the misfired stretch: the occurrences in [c, t - g),
    # all more than g late at t. Across the whole run exactly one occurrence of that stretch
    # is admitted under fire_once (c itself) and none under skip.
    misfires = [d for d in decisions if d.misfired]
    for d in misfires:
        assert d.skipped_through_ms == d.observed_at_ms - sim.grace - 1
        stretch_admitted = [a for a in admitted if d.due_at_ms <= a < d.observed_at_ms - sim.grace]
        if sim.policy is ONCE:
            assert stretch_admitted == [d.due_at_ms]
            assert d.disposition is ADMIT and d.scheduled_for_ms == d.due_at_ms
        else:
            assert stretch_admitted == []
            assert d.disposition is SKIPPED and d.scheduled_for_ms is None
        assert d.observed_at_ms - d.due_at_ms > sim.grace

    # (c) every occurrence o in [p, t_last] with lateness(o) = T(o) - o <= g is admitted, at its
    # first-due observation T(o).
    admitted_at = {
        d.scheduled_for_ms: d.observed_at_ms for d in decisions if d.scheduled_for_ms is not None
    }
    for o in occurrences:
        lateness = sim.first_due(o) - o
        if lateness <= sim.grace:
            assert o in admitted_at, (o, lateness, sim.grace)
            assert admitted_at[o] == sim.first_due(o)
        elif o in admitted_at:
            # the only late admission is the one fire_once Run of a misfired stretch
            assert sim.policy is ONCE
            assert any(d.due_at_ms == o and d.misfired for d in decisions)

    # Nothing is lost silently: every occurrence in [p, t_last] is either admitted or dropped
    # by exactly one misfire decision (its [c, t - g], boundary included as implemented);
    # nothing at or after the final cursor was decided.
    for o in occurrences:
        stretches = [d for d in misfires if d.due_at_ms <= o <= d.observed_at_ms - sim.grace]
        assert (o in admitted_at) or len(stretches) == 1, o
        assert len(stretches) <= 1
    assert all(a < sim.final_cursor for a in admitted)
