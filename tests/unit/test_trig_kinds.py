"""Interval (`qinglong/interval@v1`) and one-shot (`qinglong/once@v1`) triggers in the domain:
their arithmetic and canonical text, their specs and digests beside cron's, publishing rules,
the scheduling decision over them (admit, misfire, pause, nothing left), backfill windows, the
ledger, and the audit's independent expansion."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qinglong.audit.expansion import nominal_occurrences
from qinglong.domain.backfill import BackfillRequest, BackfillTarget, window_occurrences
from qinglong.domain.decision import Disposition, decide
from qinglong.domain.interval import IntervalSchedule, format_every, parse_every
from qinglong.domain.model import (
    LedgerCursor,
    LedgerFacts,
    LedgerMisfire,
    LedgerRevision,
    LedgerRun,
)
from qinglong.domain.occurrences import (
    DONE_CURSOR_MS,
    LAST_INSTANT_MS,
    cursor_for_storage,
    instant_text,
    is_done_cursor,
    parse_instant,
)
from qinglong.domain.once import OnceSchedule
from qinglong.domain.publishing import next_trigger_revision
from qinglong.domain.task import CommandSpec, ShellCommand, new_task_revision
from qinglong.domain.trigger import (
    MisfirePolicy,
    Overlap,
    OverlapPolicy,
    TriggerSpec,
    new_trigger_revision,
    parse_trigger_envelope,
    stored_schedule,
    trigger_revision_from_row,
)
from qinglong.errors import Conflict, InvalidInput, InvalidSchedule, RecordCorrupt
from qinglong.service.ledger import FAR_FUTURE_MS, Fate, build_ledger

SECOND = 1_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
SKIP, FIRE_ONCE = MisfirePolicy.SKIP, MisfirePolicy.FIRE_ONCE


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


T0 = ms("2026-12-01T00:00:00+00:00")


# --- the arithmetic -------------------------------------------------------------------------


def test_interval_occurrences_are_the_anchor_plus_whole_steps() -> None:
    every = IntervalSchedule(90, T0, "UTC")
    assert every.next_after(T0 - 1) == T0
    assert every.next_after(T0) == T0 + 90 * SECOND
    assert every.next_after(T0 + 89_999) == T0 + 90 * SECOND
    assert every.next_after(T0 - 10 * HOUR) == T0  # nothing before the anchor
    assert every.first_at_or_after(T0 + 90 * SECOND) == T0 + 90 * SECOND
    assert every.first_at_or_after(T0 + 90 * SECOND + 1) == T0 + 180 * SECOND
    walked = list(zip(range(4), every.iter_after(T0 + 1), strict=False))
    assert [at for _, at in walked] == [T0 + k * 90 * SECOND for k in range(1, 5)]


def test_interval_is_dst_free_while_its_local_times_show_the_shift() -> None:
    # America/New_York springs forward at 2026-03-08 07:00Z: an hourly interval keeps
    # its 3600 s spacing, so its local times jump from 01:30 to 03:30.
    anchor = ms("2026-03-08T05:30:00+00:00")  # 00:30 EST
    hourly = IntervalSchedule(3600, anchor, "America/New_York")
    found = hourly.occurrences(anchor - 1, 4)
    assert [o.at_ms - anchor for o in found] == [0, HOUR, 2 * HOUR, 3 * HOUR]
    assert [o.wall.strftime("%H:%M") for o in found] == ["00:30", "01:30", "03:30", "04:30"]
    assert all(o.note.value == "" for o in found)


def test_interval_and_once_end_at_the_end_of_time() -> None:
    last = IntervalSchedule(86_400, LAST_INSTANT_MS - 86_400 * SECOND, "UTC")
    assert last.next_after(LAST_INSTANT_MS - 86_400 * SECOND) == LAST_INSTANT_MS
    assert last.next_after(LAST_INSTANT_MS) is None
    assert list(last.iter_after(LAST_INSTANT_MS - 1)) == [LAST_INSTANT_MS]
    assert DONE_CURSOR_MS > LAST_INSTANT_MS


def test_once_has_one_occurrence_then_none() -> None:
    once = OnceSchedule(T0, "Asia/Shanghai")
    assert once.next_after(T0 - 1) == T0
    assert once.next_after(T0) is None
    assert once.first_at_or_after(T0) == T0
    assert once.first_at_or_after(T0 + 1) is None
    assert list(once.iter_after(0)) == [T0]
    assert list(once.iter_after(T0)) == []
    [only] = once.occurrences(0, 5)
    assert only.at_ms == T0 and only.wall.hour == 8  # shown in Shanghai time
    assert once.occurrences(T0, 5) == []


@pytest.mark.parametrize(("text", "seconds", "canonical"), [
    ("90s", 90, "1m30s"), ("1m30s", 90, "1m30s"), ("5400s", 5400, "1h30m"), ("1h30m", 5400, "1h30m"),
    ("1d", 86_400, "1d"), ("1d1s", 86_401, "1d1s"), ("366d", 366 * 86_400, "366d"), ("1s", 1, "1s"),
])
def test_interval_durations_and_their_canonical_text(text: str, seconds: int, canonical: str) -> None:
    assert parse_every(text) == seconds
    assert format_every(seconds) == canonical


@pytest.mark.parametrize(("text", "needle"), [
    ("0s", "from 1s"), ("367d", "366d"), ("1.5h", "not an interval"), ("500ms", "not an interval"),
    ("30m1h", "not an interval"), ("", "not an interval"), ("ten seconds", "not an interval"),
])
def test_bad_intervals_are_refused_with_the_rule(text: str, needle: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_every(text)
    assert caught.value.field == "every" and needle in caught.value.rule


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-12-24T18:00:00+08:00", "2026-12-24T10:00:00Z"),
    ("2026-12-24T10:00:00Z", "2026-12-24T10:00:00Z"),
    ("1798106400000", "2026-12-24T10:00:00Z"),
])
def test_instants_are_taken_with_an_offset_and_written_in_utc(text: str, expected: str) -> None:
    assert instant_text(parse_instant(text, "at")) == expected


@pytest.mark.parametrize(("text", "needle"), [
    ("2026-12-24T18:00:00", "needs a UTC offset"),
    ("2026-12-24T18:00:00.5Z", "whole second"),
    ("1798106400001", "whole second"),
    ("tomorrow", "not an RFC 3339 time"),
    ("99999999999999999", "not an RFC 3339 time"),
])
def test_bad_instants_are_refused(text: str, needle: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_instant(text, "at")
    assert needle in caught.value.rule


# --- specs, envelopes, digests ----------------------------------------------------------------

TASK_DIGEST = "a" * 64


def revision(spec: TriggerSpec, *, number: int = 1, created: int = T0, enabled: bool = True):  # type: ignore[no-untyped-def]
    return new_trigger_revision(project="demo", trigger="beat", revision=number, task="hello",
                                task_revision=1, task_content_digest=TASK_DIGEST, spec=spec,
                                enabled=enabled, created_at_ms=created)


def test_each_kind_has_its_schema_and_canonical_expression() -> None:
    interval = TriggerSpec.parse(expression="every 90s from 2026-12-01T08:00:00+08:00",
                                 timezone="US/Eastern", misfire="fire_once")
    assert interval.envelope() == {
        "schema": "qinglong/interval@v1",
        "config": {"expression": "every 1m30s from 2026-12-01T00:00:00Z",
                   "timezone": "America/New_York", "misfirePolicy": "fire_once"}}
    once = TriggerSpec.parse(expression="at 2026-12-24T18:00:00+08:00", timezone="UTC",
                             misfire="skip",
                             overlap=Overlap(policy=OverlapPolicy.SKIP))
    assert once.envelope() == {
        "schema": "qinglong/once@v1",
        "config": {"expression": "at 2026-12-24T10:00:00Z", "timezone": "UTC",
                   "misfirePolicy": "skip",
                   "overlap": {"policy": "skip", "queueLimit": 1}}}
    cron = TriggerSpec.parse(expression="0 3 * * *", timezone="UTC", misfire="skip")
    assert cron.envelope()["schema"] == "qinglong/cron@v1" and cron.kind == "cron"
    assert (interval.kind, once.kind) == ("interval", "once")
    assert (interval.cron_expression, cron.cron_expression) == (None, "0 3 * * *")


def test_kinds_round_trip_through_stored_rows_and_their_digests_differ() -> None:
    specs = [
        TriggerSpec.parse(expression="every 1h from 2026-12-01T00:15:00Z", timezone="UTC",
                          misfire="skip"),
        TriggerSpec.parse(expression="every 3600s from 2026-12-01T00:15:01Z", timezone="UTC",
                          misfire="skip"),
        TriggerSpec.parse(expression="at 2026-12-01T00:15:00Z", timezone="UTC", misfire="skip"),
        TriggerSpec.parse(expression="15 0 * * *", timezone="UTC", misfire="skip"),
    ]
    digests = set()
    for spec in specs:
        stored = revision(spec)
        row = {"project_id": "demo", "trigger_id": "beat", "revision": 1, "task_id": "hello",
               "task_revision": 1, "task_content_digest": TASK_DIGEST, "enabled": 1,
               "content_digest": stored.content_digest, "created_at_ms": T0}
        envelope = json.loads(spec.json_text())
        assert trigger_revision_from_row(row, envelope) == stored
        assert parse_trigger_envelope(envelope) == spec
        digests.add(stored.content_digest)
        tampered = json.loads(spec.json_text())
        tampered["config"]["expression"] = tampered["config"]["expression"].replace("15", "16", 1)
        with pytest.raises(RecordCorrupt):
            trigger_revision_from_row(row, tampered)
    assert len(digests) == len(specs)


@pytest.mark.parametrize(("schema", "expression", "needle"), [
    ("qinglong/interval@v1", "every 90s from 2026-12-01T00:00:00Z", "canonical"),  # 1m30s
    ("qinglong/interval@v1", "every 1m30s", "anchor"),  # a stored interval names its anchor
    ("qinglong/interval@v1", "at 2026-12-01T00:00:00Z", "not of kind 'interval'"),
    ("qinglong/once@v1", "at 2026-12-01T08:00:00+08:00", "canonical"),
    ("qinglong/once@v1", "0 3 * * *", "not of kind 'once'"),
    ("qinglong/cron@v1", "every 1m from 2026-12-01T00:00:00Z", "not of kind 'cron'"),
    ("qinglong/every@v1", "every 1m from 2026-12-01T00:00:00Z", "must be one of"),
])
def test_malformed_stored_kinds_are_refused(schema: str, expression: str, needle: str) -> None:
    envelope = {"schema": schema, "config": {"expression": expression, "timezone": "UTC",
                                             "misfirePolicy": "skip"}}
    with pytest.raises(InvalidInput) as caught:
        parse_trigger_envelope(envelope, stored=True)
    assert needle in str(caught.value)


def test_stored_schedule_reads_each_kind_from_its_text() -> None:
    assert stored_schedule("every 1m30s from 2026-12-01T00:00:00Z", "UTC") == IntervalSchedule(
        90, T0, "UTC")
    assert stored_schedule("at 2026-12-01T00:00:00Z", "UTC") == OnceSchedule(T0, "UTC")
    assert stored_schedule("0 0 * * *", "UTC").next_after(T0 - 1) == T0
    with pytest.raises(InvalidSchedule):
        stored_schedule("every 90s from 2026-12-01T00:00:00Z", "UTC")  # not canonical


# --- publishing ----------------------------------------------------------------------------

TASK = new_task_revision(project="demo", task="hello", revision=1, name="hello",
                         spec=CommandSpec(command=ShellCommand(command="true")), enabled=True,
                         created_at_ms=0)


def publish(current, now_ms: int, **spec: object):  # type: ignore[no-untyped-def]
    return next_trigger_revision(current, project_id="demo", trigger_id="beat", task_id="hello",
                                 enabled=bool(spec.pop("enabled", True)), task=TASK,
                                 now_ms=now_ms, **spec)  # type: ignore[arg-type]


def test_a_new_interval_is_anchored_at_its_publish_time_and_keeps_its_anchor() -> None:
    first = publish(None, T0 + 300, expression="every 90s")
    assert first is not None and first.spec.timezone == "UTC"  # no zone needed
    schedule = first.spec.schedule
    assert isinstance(schedule, IntervalSchedule) and schedule.anchor_ms == T0 + SECOND
    # republishing the same interval is a no-op (the anchor is kept, not reset to now)
    assert publish(first, T0 + HOUR, expression="every 90s") is None
    # a new interval keeps the anchor, a new zone only changes how it is shown
    second = publish(first, T0 + HOUR, expression="every 2m", timezone="Asia/Shanghai")
    assert second is not None
    assert second.spec.schedule == IntervalSchedule(120, T0 + SECOND, "Asia/Shanghai")
    # an anchor given replaces it
    third = publish(second, T0 + 2 * HOUR, expression="every 2m from 2026-12-01T00:00:30Z")
    assert third is not None and third.spec.schedule.anchor_ms == T0 + 30 * SECOND
    assert third.spec.timezone == "Asia/Shanghai"


def test_switching_kinds_and_the_cron_zone_rule() -> None:
    cron = publish(None, T0, expression="0 * * * *", timezone="Europe/Berlin")
    assert cron is not None
    interval = publish(cron, T0 + HOUR, expression="every 1h")
    assert interval is not None
    assert interval.spec.schedule == IntervalSchedule(3600, T0 + HOUR, "Europe/Berlin")
    once = publish(interval, T0 + 2 * HOUR, expression="at 2026-12-02T00:00:00Z")
    assert once is not None and once.spec.kind == "once"
    with pytest.raises(InvalidInput) as caught:
        publish(None, T0, expression="0 * * * *")
    assert caught.value.field == "timezone"
    with pytest.raises(InvalidInput) as caught:
        publish(None, T0)
    assert "--every" in caught.value.rule and "--at" in caught.value.rule


def test_a_one_shot_instant_must_not_have_passed_when_it_is_published() -> None:
    with pytest.raises(InvalidInput) as caught:
        publish(None, T0 + 1, expression="at 2026-12-01T00:00:00Z")
    assert caught.value.field == "at" and "in the past" in caught.value.rule
    on_time = publish(None, T0, expression="at 2026-12-01T00:00:00Z")  # at the publish time
    assert on_time is not None
    # published disabled, a past instant is kept as a record; enabling it later is allowed (it
    # is done at once), and so is changing another part of it after its instant
    record = publish(None, T0 + HOUR, expression="at 2026-12-01T00:00:00Z", enabled=False)
    assert record is not None and not record.enabled
    assert publish(record, T0 + 2 * HOUR) is not None
    later = publish(on_time, T0 + HOUR, misfire_policy="fire_once")
    assert later is not None and later.spec.misfire_policy is FIRE_ONCE
    with pytest.raises(Conflict):
        next_trigger_revision(on_time, project_id="demo", trigger_id="beat", task_id="other",
                              enabled=True, task=TASK, now_ms=T0 + HOUR)


# --- the decision -------------------------------------------------------------------------


def test_decide_walks_an_interval_like_any_source() -> None:
    every = IntervalSchedule(90, T0, "UTC")
    first = decide(cursor_ms=None, published_at_ms=T0 - 5 * SECOND, observed_at_ms=T0 - SECOND,
                   grace_ms=30_000, policy=SKIP, occurrences=every)
    assert first.disposition is Disposition.INITIALIZE and first.next_fire_at_ms == T0
    on_time = decide(cursor_ms=T0, published_at_ms=T0 - 5 * SECOND, observed_at_ms=T0 + 100,
                     grace_ms=30_000, policy=SKIP, occurrences=every)
    assert on_time.scheduled_for_ms == T0 and on_time.next_fire_at_ms == T0 + 90 * SECOND
    late = decide(cursor_ms=T0, published_at_ms=T0 - 5 * SECOND, observed_at_ms=T0 + HOUR,
                  grace_ms=30_000, policy=FIRE_ONCE, occurrences=every)
    assert late.misfired and late.scheduled_for_ms == T0
    assert late.next_fire_at_ms == every.first_at_or_after(T0 + HOUR - 30_000)
    assert late.skipped_through_ms == T0 + HOUR - 30_001


@pytest.mark.parametrize("policy", [SKIP, FIRE_ONCE])
def test_a_one_shot_decision_leaves_nothing_after_it(policy: MisfirePolicy) -> None:
    once = OnceSchedule(T0, "UTC")
    on_time = decide(cursor_ms=T0, published_at_ms=T0 - HOUR, observed_at_ms=T0 + 10,
                     grace_ms=30_000, policy=policy, occurrences=once)
    assert on_time.disposition is Disposition.ADMIT and on_time.scheduled_for_ms == T0
    assert on_time.next_fire_at_ms is None and not on_time.misfired
    late = decide(cursor_ms=T0, published_at_ms=T0 - HOUR, observed_at_ms=T0 + MINUTE,
                  grace_ms=30_000, policy=policy, occurrences=once)
    assert late.misfired and late.next_fire_at_ms is None
    assert late.scheduled_for_ms == (T0 if policy is FIRE_ONCE else None)
    assert late.due_at_ms == T0 <= late.skipped_through_ms  # type: ignore[operator]
    assert cursor_for_storage(late.next_fire_at_ms) == DONE_CURSOR_MS > late.skipped_through_ms  # type: ignore[operator]


def test_a_one_shot_instant_before_the_publish_initialises_a_finished_row() -> None:
    once = OnceSchedule(T0, "UTC")
    decision = decide(cursor_ms=None, published_at_ms=T0 + 1, observed_at_ms=T0 + SECOND,
                      grace_ms=30_000, policy=FIRE_ONCE, occurrences=once)
    assert decision.disposition is Disposition.INITIALIZE
    assert decision.next_fire_at_ms is None and decision.scheduled_for_ms is None
    assert is_done_cursor(cursor_for_storage(decision.next_fire_at_ms))
    assert not is_done_cursor(None) and not is_done_cursor(LAST_INSTANT_MS)


def test_a_pause_over_a_one_shot_instant_decides_it_by_the_misfire_policy() -> None:
    from qinglong.domain.decision import Pause

    once = OnceSchedule(T0, "UTC")
    pause = Pause(from_ms=T0 - MINUTE, until_ms=T0 + 10 * SECOND)
    resumed = decide(cursor_ms=T0, published_at_ms=T0 - HOUR, observed_at_ms=T0 + 11 * SECOND,
                     grace_ms=30_000, policy=SKIP, occurrences=once, pause=pause)
    assert resumed.disposition is Disposition.ADMIT and resumed.scheduled_for_ms == T0
    assert resumed.paused_from_ms is None and resumed.next_fire_at_ms is None
    every = IntervalSchedule(10, T0, "UTC")
    held = decide(cursor_ms=T0, published_at_ms=T0 - HOUR, observed_at_ms=T0 + 95 * SECOND,
                  grace_ms=30_000, policy=SKIP, occurrences=every,
                  pause=Pause(from_ms=T0 - MINUTE, until_ms=T0 + 85 * SECOND))
    # 00:00 .. 01:10 held back; 01:20, the one in progress at the resume, is 15 s late
    assert (held.paused_from_ms, held.paused_through_ms) == (T0, T0 + 80 * SECOND - 1)
    assert held.scheduled_for_ms == T0 + 80 * SECOND and held.next_fire_at_ms == T0 + 90 * SECOND


@settings(max_examples=200, deadline=None)
@given(every_s=st.integers(1, 5_000), anchor_s=st.integers(0, 10_000),
       cursor_s=st.integers(0, 20_000), late_ms=st.integers(0, 200_000),
       policy=st.sampled_from([SKIP, FIRE_ONCE]))
def test_interval_decisions_move_the_cursor_onto_the_grid(every_s: int, anchor_s: int,
                                                          cursor_s: int, late_ms: int,
                                                          policy: MisfirePolicy) -> None:
    every = IntervalSchedule(every_s, T0 + anchor_s * SECOND, "UTC")
    cursor = every.first_at_or_after(T0 + cursor_s * SECOND)
    assert cursor is not None
    decision = decide(cursor_ms=cursor, published_at_ms=T0, observed_at_ms=cursor + late_ms,
                      grace_ms=30_000, policy=policy, occurrences=every)
    nxt = decision.next_fire_at_ms
    assert nxt is not None and nxt > cursor
    assert (nxt - every.anchor_ms) % (every_s * SECOND) == 0
    if not decision.misfired:
        assert nxt == cursor + every_s * SECOND
    else:  # the first occurrence still on time at the observation
        assert nxt >= cursor + late_ms - 30_000 > nxt - every_s * SECOND


# --- backfill ------------------------------------------------------------------------------


def target(spec: TriggerSpec, cursor: int | None) -> BackfillTarget:
    return BackfillTarget(trigger=revision(spec), cursor_ms=cursor)


def test_backfill_windows_of_interval_and_one_shot_triggers() -> None:
    interval = TriggerSpec.parse(expression="every 10m from 2026-12-01T00:00:00Z", timezone="UTC",
                                 misfire="skip")
    request = BackfillRequest(project_id="demo", trigger_id="beat", from_ms=T0 + MINUTE,
                              to_ms=T0 + HOUR, actor="alice")
    assert window_occurrences(request, target(interval, T0 + 2 * HOUR)) == tuple(
        T0 + k * 10 * MINUTE for k in range(1, 7))
    once = TriggerSpec.parse(expression="at 2026-12-01T00:30:00Z", timezone="UTC",
                             misfire="skip")
    finished = target(once, DONE_CURSOR_MS)
    assert finished.finished and "end of the trigger's schedule" in finished.horizon_text()
    assert window_occurrences(request, finished) == (T0 + 30 * MINUTE,)
    with pytest.raises(InvalidInput) as caught:  # not decided yet: the scheduler's
        window_occurrences(request, target(once, T0 + 30 * MINUTE))
    assert caught.value.field == "to"


# --- the ledger ---------------------------------------------------------------------------


def ledger_revision(expression: str, *, at: int = T0 - HOUR) -> LedgerRevision:
    return LedgerRevision(revision=1, enabled=True, published_at_ms=at, expression=expression,
                          timezone="UTC", misfire_policy="skip", task_revision=1)


def ledger_facts(expression: str, cursor: int | None, *, runs: tuple[LedgerRun, ...] = (),
                 misfires: tuple[LedgerMisfire, ...] = (), now: int = T0 + HOUR) -> LedgerFacts:
    return LedgerFacts(project_id="demo", trigger_id="beat", from_ms=0, to_ms=FAR_FUTURE_MS,
                       now_ms=now, revisions=(ledger_revision(expression),), task_revisions=(),
                       runs=runs, misfires=misfires, pauses=(), archivals=(),
                       cursor=LedgerCursor(trigger_revision=1, next_fire_at_ms=cursor))


def test_the_ledger_of_a_done_one_shot_trigger() -> None:
    ran = build_ledger(ledger_facts("at 2026-12-01T00:00:00Z", DONE_CURSOR_MS,
                                    runs=(LedgerRun(id="r1", scheduled_for_ms=T0,
                                                    status="succeeded", trigger_type="cron",
                                                    trigger_revision=1),)),
                       from_ms=T0 - HOUR, to_ms=T0 + HOUR, upcoming=3)
    assert [(e.at_ms, e.fate) for e in ran.entries] == [(T0, Fate.RAN)]
    skipped = build_ledger(ledger_facts(
        "at 2026-12-01T00:00:00Z", DONE_CURSOR_MS,
        misfires=(LedgerMisfire(trigger_revision=1, due_at_ms=T0, skipped_through_ms=T0 + 5,
                                policy="skip", decided_at_ms=T0 + MINUTE),)),
        from_ms=T0 - HOUR, to_ms=T0 + HOUR)
    assert [e.fate for e in skipped.entries] == [Fate.SKIPPED]
    pending = build_ledger(ledger_facts("at 2026-12-01T02:00:00Z", T0 + 2 * HOUR),
                           from_ms=T0 - HOUR, to_ms=T0 + HOUR, upcoming=3)
    assert [(e.at_ms, e.fate) for e in pending.entries] == [(T0 + 2 * HOUR, Fate.PENDING)]


def test_the_ledger_of_an_interval_trigger() -> None:
    built = build_ledger(ledger_facts("every 20m from 2026-12-01T00:00:00Z", T0 + 40 * MINUTE,
                                      runs=(LedgerRun(id="r1", scheduled_for_ms=T0,
                                                      status="succeeded", trigger_type="cron",
                                                      trigger_revision=1),),
                                      now=T0 + 50 * MINUTE),
                         from_ms=T0 - HOUR, to_ms=T0 + 50 * MINUTE, upcoming=2)
    assert [(e.at_ms - T0, e.fate) for e in built.entries] == [
        (0, Fate.RAN), (20 * MINUTE, Fate.MISSING), (40 * MINUTE, Fate.DUE),
        (60 * MINUTE, Fate.PENDING), (80 * MINUTE, Fate.PENDING)]


# --- the audit's own expansion ------------------------------------------------------------


def test_the_audit_expands_interval_and_one_shot_text_by_itself() -> None:
    assert nominal_occurrences("every 1m30s from 2026-12-01T00:00:00Z", "UTC",
                               T0 - HOUR, T0 + 4 * MINUTE) == [T0, T0 + 90_000, T0 + 180_000]
    assert nominal_occurrences("every 1m30s from 2026-12-01T00:00:00Z", "UTC",
                               T0 + 1, T0 + 90_000) == [T0 + 90_000]
    assert nominal_occurrences("at 2026-12-01T00:00:00Z", "Asia/Shanghai", T0, T0) == [T0]
    assert nominal_occurrences("at 2026-12-01T00:00:00Z", "UTC", T0 + 1, T0 + HOUR) == []
    with pytest.raises(ValueError, match="window too large"):
        nominal_occurrences("every 1s from 1970-01-01T00:00:00Z", "UTC", 0, T0)
    with pytest.raises(ValueError, match="neither"):
        nominal_occurrences("every 90 from 2026-12-01T00:00:00Z", "UTC", 0, T0)


@settings(max_examples=300, deadline=None)
@given(every_s=st.integers(1, 400_000), anchor_s=st.integers(-100_000, 100_000),
       start_s=st.integers(-50_000, 500_000), span_s=st.integers(0, 2_000_000),
       start_ms=st.integers(0, 999), end_ms=st.integers(0, 999))
def test_the_audit_and_the_scheduler_agree_on_intervals(every_s: int, anchor_s: int, start_s: int,
                                                        span_s: int, start_ms: int,
                                                        end_ms: int) -> None:
    schedule = IntervalSchedule(every_s, T0 + anchor_s * SECOND, "Europe/Berlin")
    low = T0 + start_s * SECOND + start_ms
    high = low + span_s * SECOND + end_ms
    walked = []
    at = schedule.first_at_or_after(low)
    while at is not None and at <= high:
        walked.append(at)
        at = schedule.next_after(at)
    assert nominal_occurrences(schedule.expression, schedule.timezone, low, high) == walked


def test_instant_text_is_utc_whole_seconds() -> None:
    assert instant_text(T0 + 999) == "2026-12-01T00:00:00Z"
    assert instant_text(0) == "1970-01-01T00:00:00Z"
    assert datetime.fromtimestamp(LAST_INSTANT_MS / 1000, UTC).year == 9999
