"""The DST policy of a cron trigger: `gap` shift (default) or skip, `overlap` first (default),
second or both. Named tables at the real 2026 transitions of four zones (Europe/Berlin,
America/New_York, Australia/Lord_Howe with its 30-minute shift, and the southern
America/Santiago, whose clocks change at midnight), 5- and 6-field expressions; interval
expressions are untouched and refuse a policy; the spec keeps old envelopes and digests; the
decision over a pause across a DST change; and the audit's own expansion agrees with the
scheduler under every policy."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from qinglong.audit.expansion import nominal_occurrences
from qinglong.domain.cron import CronSchedule, DstGap, DstNote, DstOverlap, DstPolicy, is_wall_clock
from qinglong.domain.decision import Disposition, Pause, decide
from qinglong.domain.publishing import next_trigger_revision
from qinglong.domain.task import CommandSpec, ShellCommand, new_task_revision
from qinglong.domain.trigger import (
    MisfirePolicy,
    TriggerSpec,
    new_trigger_revision,
    parse_trigger_envelope,
)
from qinglong.errors import InvalidInput, InvalidSchedule
from tests.unit.test_audit_expansion import cases

BER, NY, LHI, SCL = "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago"
SHIFT_FIRST = ("shift", "first")
SECOND = 1_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def iso(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def policy(gap: str = "shift", overlap: str = "first") -> DstPolicy:
    return DstPolicy.parse(gap, overlap)


# (id, zone, expression, gap, overlap, after, [(utc, note), ...]) -- the next occurrences
TABLE = [
    # Europe/Berlin: 2026-03-29 02:00 -> 03:00 (01:00Z); 2026-10-25 03:00 -> 02:00 (01:00Z)
    ("berlin-gap-shift", BER, "30 2 * * *", "shift", "first", "2026-03-28T12:00:00Z",
     [("2026-03-29T01:00:00Z", "gap-shifted"), ("2026-03-30T00:30:00Z", "")]),
    ("berlin-gap-skip", BER, "30 2 * * *", "skip", "first", "2026-03-28T12:00:00Z",
     [("2026-03-30T00:30:00Z", ""), ("2026-03-31T00:30:00Z", "")]),
    ("berlin-gap-skip-6-fields", BER, "15 30 2 * * *", "skip", "both", "2026-03-28T12:00:00Z",
     [("2026-03-30T00:30:15Z", ""), ("2026-03-31T00:30:15Z", "")]),
    ("berlin-overlap-first", BER, "30 2 * * *", "shift", "first", "2026-10-24T12:00:00Z",
     [("2026-10-25T00:30:00Z", "overlap-first"), ("2026-10-26T01:30:00Z", "")]),
    ("berlin-overlap-second", BER, "30 2 * * *", "skip", "second", "2026-10-24T12:00:00Z",
     [("2026-10-25T01:30:00Z", "overlap-second"), ("2026-10-26T01:30:00Z", "")]),
    ("berlin-overlap-both", BER, "30 2 * * *", "shift", "both", "2026-10-24T12:00:00Z",
     [("2026-10-25T00:30:00Z", "overlap-first"), ("2026-10-25T01:30:00Z", "overlap-second"),
      ("2026-10-26T01:30:00Z", "")]),
    ("berlin-overlap-both-two-times", BER, "0,45 2 * * *", "shift", "both", "2026-10-24T12:00:00Z",
     [("2026-10-25T00:00:00Z", "overlap-first"), ("2026-10-25T00:45:00Z", "overlap-first"),
      ("2026-10-25T01:00:00Z", "overlap-second"), ("2026-10-25T01:45:00Z", "overlap-second"),
      ("2026-10-26T01:00:00Z", "")]),
    # America/New_York: 2026-03-08 02:00 -> 03:00 (07:00Z); 2026-11-01 02:00 -> 01:00 (06:00Z)
    ("new-york-gap-shift", NY, "30 2 * * *", "shift", "first", "2026-03-07T12:00:00Z",
     [("2026-03-08T07:00:00Z", "gap-shifted"), ("2026-03-09T06:30:00Z", "")]),
    ("new-york-gap-skip", NY, "30 2 * * *", "skip", "first", "2026-03-07T12:00:00Z",
     [("2026-03-09T06:30:00Z", ""), ("2026-03-10T06:30:00Z", "")]),
    ("new-york-overlap-second", NY, "30 1 * * *", "shift", "second", "2026-10-31T12:00:00Z",
     [("2026-11-01T06:30:00Z", "overlap-second"), ("2026-11-02T06:30:00Z", "")]),
    ("new-york-overlap-both", NY, "30 1 * * SUN", "shift", "both", "2026-10-25T12:00:00Z",
     [("2026-11-01T05:30:00Z", "overlap-first"), ("2026-11-01T06:30:00Z", "overlap-second"),
      ("2026-11-08T06:30:00Z", "")]),
    # Australia/Lord_Howe (30-minute shift): 2026-04-05 02:00 -> 01:30 (15:00Z on the 4th);
    # 2026-10-04 02:00 -> 02:30 (15:30Z on the 3rd)
    ("lord-howe-gap-shift", LHI, "15 2 * * *", "shift", "first", "2026-10-03T00:00:00Z",
     [("2026-10-03T15:30:00Z", "gap-shifted"), ("2026-10-04T15:15:00Z", "")]),
    ("lord-howe-gap-skip", LHI, "15 2 * * *", "skip", "first", "2026-10-03T00:00:00Z",
     [("2026-10-04T15:15:00Z", ""), ("2026-10-05T15:15:00Z", "")]),
    ("lord-howe-overlap-first", LHI, "45 1 * * *", "shift", "first", "2026-04-04T00:00:00Z",
     [("2026-04-04T14:45:00Z", "overlap-first"), ("2026-04-05T15:15:00Z", "")]),
    ("lord-howe-overlap-second", LHI, "45 1 * * *", "shift", "second", "2026-04-04T00:00:00Z",
     [("2026-04-04T15:15:00Z", "overlap-second"), ("2026-04-05T15:15:00Z", "")]),
    ("lord-howe-overlap-both", LHI, "45 1 * * *", "skip", "both", "2026-04-04T00:00:00Z",
     [("2026-04-04T14:45:00Z", "overlap-first"), ("2026-04-04T15:15:00Z", "overlap-second"),
      ("2026-04-05T15:15:00Z", "")]),
    ("lord-howe-outside-the-half-hour", LHI, "15 1 * * *", "skip", "both", "2026-04-04T00:00:00Z",
     [("2026-04-04T14:15:00Z", ""), ("2026-04-05T14:45:00Z", "")]),  # 01:15 happens once
    # America/Santiago (south, at midnight): 2026-04-05 00:00 -> 04-04 23:00 (03:00Z);
    # 2026-09-06 00:00 -> 01:00 (04:00Z)
    ("santiago-gap-shift", SCL, "30 0 * * *", "shift", "first", "2026-09-05T12:00:00Z",
     [("2026-09-06T04:00:00Z", "gap-shifted"), ("2026-09-07T03:30:00Z", "")]),
    ("santiago-gap-skip", SCL, "30 0 * * *", "skip", "first", "2026-09-05T12:00:00Z",
     [("2026-09-07T03:30:00Z", ""), ("2026-09-08T03:30:00Z", "")]),
    ("santiago-overlap-second", SCL, "30 23 * * *", "shift", "second", "2026-04-04T12:00:00Z",
     [("2026-04-05T03:30:00Z", "overlap-second"), ("2026-04-06T03:30:00Z", "")]),
    ("santiago-overlap-both", SCL, "30 23 * * *", "skip", "both", "2026-04-04T12:00:00Z",
     [("2026-04-05T02:30:00Z", "overlap-first"), ("2026-04-05T03:30:00Z", "overlap-second"),
      ("2026-04-06T03:30:00Z", "")]),
]


@pytest.mark.parametrize(("zone", "expr", "gap", "overlap", "after", "expected"),
                         [case[1:] for case in TABLE], ids=[case[0] for case in TABLE])
def test_policies_at_real_transitions(zone: str, expr: str, gap: str, overlap: str, after: str,
                                      expected: list[tuple[str, str]]) -> None:
    schedule = CronSchedule.parse(expr, zone, policy(gap, overlap))
    found = schedule.occurrences(ms(after), len(expected))
    assert [(iso(o.at_ms), o.note.value) for o in found] == expected
    # next_after agrees with occurrences(), one step at a time, from every point between
    at = ms(after)
    for instant, _ in expected:
        assert iso(at := schedule.next_after(at)) == instant
        assert iso(schedule.next_after(ms(instant) - 1)) == instant
    # and the audit's own expansion finds the same instants
    window = nominal_occurrences(expr, zone, ms(after), ms(expected[-1][0]), dst_gap=gap,
                                 dst_overlap=overlap)
    assert [iso(t) for t in window] == [instant for instant, _ in expected]


def test_a_skipped_gap_is_reported_with_the_next_occurrence() -> None:
    schedule = CronSchedule.parse("30 2 * * *", NY, policy("skip"))
    [after_gap] = schedule.occurrences(ms("2026-03-07T12:00:00Z"), 1)
    assert [w.isoformat() for w in after_gap.skipped] == ["2026-03-08T02:30:00"]
    assert after_gap.note is DstNote.NONE
    plain = CronSchedule.parse("30 2 * * *", NY).occurrences(ms("2026-03-07T12:00:00Z"), 2)
    assert all(o.skipped == () for o in plain)


@pytest.mark.parametrize("expr", ["*/30 * * * *", "0 * * * *", "30 * * * *", "0 */2 * * *",
                                  "* 30 2 * * *"])
@pytest.mark.parametrize(("gap", "overlap"), [("skip", "first"), ("shift", "both"),
                                              ("shift", "second")])
def test_interval_expressions_refuse_a_policy(expr: str, gap: str, overlap: str) -> None:
    assert not is_wall_clock(expr)
    with pytest.raises(InvalidSchedule) as caught:
        CronSchedule.parse(expr, NY, policy(gap, overlap))
    assert caught.value.field == ("dst-gap" if gap == "skip" else "dst-overlap")
    assert "wall-clock" in caught.value.rule


@pytest.mark.parametrize("zone", [BER, NY, LHI, SCL])
def test_interval_expressions_follow_real_time_across_every_transition(zone: str) -> None:
    """`*/30 * * * *` keeps its 30-minute cadence in real time: never doubled, never stalled
    (wall times in a gap do not occur; repeated ones occur twice), as before policies."""
    schedule = CronSchedule.parse("*/15 * * * *", zone)
    for start in ("2026-03-01T00:00:00Z", "2026-09-01T00:00:00Z", "2026-04-01T00:00:00Z",
                  "2026-10-01T00:00:00Z", "2026-10-24T00:00:00Z", "2026-11-01T00:00:00Z"):
        found = [o.at_ms for o in schedule.occurrences(ms(start), 3_000)]
        gaps = {b - a for a, b in itertools.pairwise(found)}
        half_hour_zone = zone == LHI  # its offset moves by 30 min: still a 15-min grid
        assert gaps == {15 * MINUTE}, (zone, start, half_hour_zone)


# --- the spec ---------------------------------------------------------------------------

TASK_DIGEST = "a" * 64


def revision(spec: TriggerSpec):  # type: ignore[no-untyped-def]
    return new_trigger_revision(project="demo", trigger="nightly", revision=1, task="backup",
                                task_revision=1, task_content_digest=TASK_DIGEST, spec=spec,
                                enabled=True, created_at_ms=0)


def test_the_default_policy_is_not_stored_so_old_revisions_keep_their_digest() -> None:
    old = TriggerSpec.parse(expression="0 3 * * *", timezone=BER, misfire="skip")
    explicit = TriggerSpec.parse(expression="0 3 * * *", timezone=BER, misfire="skip",
                                 dst=policy("shift", "first"))
    assert old == explicit and old.json_text() == explicit.json_text()
    assert "dst" not in old.json_text()
    assert revision(old).content_digest == revision(explicit).content_digest
    skipping = TriggerSpec.parse(expression="0 3 * * *", timezone=BER, misfire="skip",
                                 dst=policy("skip"))
    assert skipping.envelope()["config"] == {
        "expression": "0 3 * * *", "timezone": BER, "misfirePolicy": "skip",
        "dst": {"gap": "skip", "overlap": "first"}}
    assert revision(skipping).content_digest != revision(old).content_digest
    assert parse_trigger_envelope(skipping.envelope(), stored=True) == skipping
    assert parse_trigger_envelope(skipping.envelope()) == skipping


@pytest.mark.parametrize(("dst", "needle"), [
    ({"gap": "shift", "overlap": "first"}, "canonical"),  # the default is left out
    ({"gap": "skip"}, "exactly gap and overlap"),
    ({"gap": "later", "overlap": "first"}, "shift or skip"),
    ({"gap": "shift", "overlap": "twice"}, "first, second or both"),
    ("skip", "must be an object"),
])
def test_a_malformed_stored_policy_is_refused(dst: object, needle: str) -> None:
    envelope = {"schema": "qinglong/cron@v1", "config": {
        "expression": "0 3 * * *", "timezone": BER, "misfirePolicy": "skip", "dst": dst}}
    with pytest.raises(InvalidInput) as caught:
        parse_trigger_envelope(envelope, stored=True)
    assert needle in str(caught.value)


def test_only_cron_specs_carry_a_policy() -> None:
    envelope = {"schema": "qinglong/interval@v1", "config": {
        "expression": "every 1h from 2026-01-01T00:00:00Z", "timezone": BER,
        "misfirePolicy": "skip", "dst": {"gap": "skip", "overlap": "first"}}}
    with pytest.raises(InvalidInput, match="must have exactly"):
        parse_trigger_envelope(envelope)
    with pytest.raises(InvalidSchedule, match="only to cron triggers"):
        TriggerSpec.parse(expression="every 1h", timezone=BER, misfire="skip",
                          default_anchor_ms=0, dst=policy("skip"))
    assert TriggerSpec.parse(expression="every 1h", timezone=BER, misfire="skip",
                             default_anchor_ms=0).dst is None


# --- publishing ---------------------------------------------------------------------------

TASK = new_task_revision(project="demo", task="backup", revision=1, name="backup",
                         spec=CommandSpec(command=ShellCommand(command="true")), enabled=True,
                         created_at_ms=0)


def publish(current, **spec: object):  # type: ignore[no-untyped-def]
    return next_trigger_revision(current, project_id="demo", trigger_id="nightly",
                                 task_id="backup", enabled=True, task=TASK, now_ms=HOUR,
                                 **spec)  # type: ignore[arg-type]


def test_a_policy_is_kept_changed_and_checked_on_publish() -> None:
    first = publish(None, expression="30 2 * * *", timezone=NY, dst_gap="skip")
    assert first is not None and first.spec.dst == policy("skip", "first")
    assert publish(first, dst_gap="skip") is None  # the same again: no new revision
    both = publish(first, dst_overlap="both")
    assert both is not None and both.spec.dst == policy("skip", "both")
    moved = publish(both, expression="45 1 * * *", timezone=BER)  # kept across a new schedule
    assert moved is not None and moved.spec.dst == policy("skip", "both")
    back = publish(moved, dst_gap="shift", dst_overlap="first")
    assert back is not None and "dst" not in back.spec.json_text()
    with pytest.raises(InvalidSchedule) as caught:  # an interval expression keeps no policy
        publish(moved, expression="*/5 * * * *")
    assert caught.value.field == "dst-gap" and "wall-clock" in caught.value.rule
    as_interval = publish(moved, expression="every 1h")  # another kind: the policy goes
    assert as_interval is not None and as_interval.spec.dst is None
    with pytest.raises(InvalidSchedule, match="only to cron"):
        publish(as_interval, dst_overlap="second")
    with pytest.raises(InvalidSchedule, match="shift or skip"):
        publish(first, dst_gap="sometimes")


# --- the decision, over a pause across a DST change ----------------------------------------


@pytest.mark.parametrize("misfire", [MisfirePolicy.SKIP, MisfirePolicy.FIRE_ONCE])
def test_a_pause_across_spring_forward_follows_the_gap_policy(misfire: MisfirePolicy) -> None:
    """Paused from Saturday noon to Sunday noon over New York's spring-forward night: with
    gap shift the Sunday occurrence (shifted to 03:00 EDT) is the one in progress at the
    resume and follows the misfire policy; with gap skip there is none that day, and the
    cursor (Monday) is not in the pause at all."""
    pause = Pause(from_ms=ms("2026-03-07T17:00:00Z"), until_ms=ms("2026-03-08T16:00:00Z"))
    observed = ms("2026-03-08T16:00:05Z")
    shift = CronSchedule.parse("30 2 * * *", NY)
    cursor = shift.next_after(ms("2026-03-07T12:00:00Z"))  # Saturday 02:30 EST has passed
    assert iso(cursor) == "2026-03-08T07:00:00Z"
    decided = decide(cursor_ms=cursor, published_at_ms=0, observed_at_ms=observed,
                     grace_ms=30_000, policy=misfire, occurrences=shift, pause=pause)
    assert decided.misfired and iso(decided.due_at_ms) == "2026-03-08T07:00:00Z"
    assert decided.scheduled_for_ms == (cursor if misfire is MisfirePolicy.FIRE_ONCE else None)
    assert iso(decided.next_fire_at_ms) == "2026-03-09T06:30:00Z"  # type: ignore[arg-type]
    skip = CronSchedule.parse("30 2 * * *", NY, policy("skip"))
    cursor = skip.next_after(ms("2026-03-07T12:00:00Z"))
    assert iso(cursor) == "2026-03-09T06:30:00Z"  # Sunday has no occurrence
    quiet = decide(cursor_ms=None, published_at_ms=ms("2026-03-07T12:00:00Z"),
                   observed_at_ms=observed, grace_ms=30_000, policy=misfire, occurrences=skip)
    assert quiet.disposition is Disposition.INITIALIZE and quiet.next_fire_at_ms == cursor


def test_a_pause_across_fall_back_holds_the_first_instant_and_runs_the_second() -> None:
    """overlap both in New York: 01:30 EDT (05:30Z) falls in the pause and is recorded as
    paused; 01:30 EST (06:30Z), in progress at the resume, runs on time."""
    both = CronSchedule.parse("30 1 * * *", NY, policy("shift", "both"))
    pause = Pause(from_ms=ms("2026-11-01T05:00:00Z"), until_ms=ms("2026-11-01T06:30:05Z"))
    decided = decide(cursor_ms=ms("2026-11-01T05:30:00Z"), published_at_ms=0,
                     observed_at_ms=ms("2026-11-01T06:30:10Z"), grace_ms=30_000,
                     policy=MisfirePolicy.SKIP, occurrences=both, pause=pause)
    assert decided.disposition is Disposition.ADMIT and not decided.misfired
    assert iso(decided.scheduled_for_ms) == "2026-11-01T06:30:00Z"  # type: ignore[arg-type]
    assert (iso(decided.paused_from_ms), decided.paused_through_ms) == (  # type: ignore[arg-type]
        "2026-11-01T05:30:00Z", ms("2026-11-01T06:30:00Z") - 1)
    assert iso(decided.next_fire_at_ms) == "2026-11-02T06:30:00Z"  # type: ignore[arg-type]
    first = CronSchedule.parse("30 1 * * *", NY)  # the default: nothing left at the resume
    in_progress = decide(cursor_ms=ms("2026-11-01T05:30:00Z"), published_at_ms=0,
                         observed_at_ms=ms("2026-11-01T06:30:10Z"), grace_ms=30_000,
                         policy=MisfirePolicy.SKIP, occurrences=first, pause=pause)
    assert in_progress.misfired and in_progress.scheduled_for_ms is None


# --- the audit's expansion agrees with the scheduler, under every policy --------------------

POLICIES = st.tuples(st.sampled_from(list(DstGap)), st.sampled_from(list(DstOverlap)))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(), chosen=POLICIES)
def test_the_audit_and_the_scheduler_agree_under_every_policy(
        case: tuple[str, str, int, int], chosen: tuple[DstGap, DstOverlap]) -> None:
    expr, zone, start_ms, end_ms = case
    dst = DstPolicy(gap=chosen[0], overlap=chosen[1])
    try:
        schedule = CronSchedule.parse(expr, zone, dst)
    except InvalidSchedule:
        assume(False)  # the grammar makes what the scheduler refuses (an interval, ...)
    assume(is_wall_clock(schedule.expression))
    walked: list[int] = []
    try:
        at = schedule.first_at_or_after(start_ms)
        while at <= end_ms:
            walked.append(at)
            at = schedule.next_after(at)
    except InvalidSchedule:  # "has no further occurrence"
        pass
    ours = nominal_occurrences(expr, zone, start_ms, end_ms, dst_gap=dst.gap.value,
                               dst_overlap=dst.overlap.value)
    assert [iso(t) for t in ours] == [iso(t) for t in walked], (expr, zone, dst)


def test_policies_change_nothing_where_there_is_no_transition() -> None:
    for gap in DstGap:
        for overlap in DstOverlap:
            found = CronSchedule.parse("30 2 * * *", "Asia/Shanghai",
                                       DstPolicy(gap=gap, overlap=overlap)).occurrences(0, 5)
            assert [o.at_ms for o in found] == [
                o.at_ms for o in CronSchedule.parse("30 2 * * *", "Asia/Shanghai").occurrences(0, 5)]
