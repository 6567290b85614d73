"""The opt-in notification events of issue 22 on every database: ``started`` and ``succeeded``
(scanned from run_events, once per Run and channel however many attempts start, only while a
rule asks for them: the idle probe stays quiet otherwise) and the two deadlines,
``running_long`` and ``late_start`` (walked like ``unplaceable``: never before the rule's
delay, once per Run and channel, a page at a time), and the rules that carry their delays.

Time: PostgreSQL stamps rows with its own clock, which a test cannot move, so a Run is made
older instead (its times moved back by as much), which is the same to a judgement against
the store's clock; the same is done on SQLite. Nothing sleeps.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from qinglong.domain.notify.events import RuleEvent
from qinglong.errors import InvalidInput
from qinglong.storage.notify.params import OutboxProbeParams, RuleAddParams, UnplaceableParams
from qinglong.storage.runs.params import AttemptFinishParams
from tests.contract.test_leases import acquire, run_to_running
from tests.contract.test_notify_outbox import (
    FAILED,
    SETTLED,
    UNSETTLED,
    Notify,
    add_channel,
    notify,
)
from tests.contract.test_retries_and_overlap import (
    RETRIES,
    RETRY_WAIT_OVER_MS,
    SUCCEEDED,
    finish,
    publish,
)

MINUTE = 60_000
__all__ = ["notify"]  # the fixture, used by name


def rule(n: Notify, *events: RuleEvent, channel: str = "ops", task: str | None = None,
         **delays: int) -> None:
    n.admin.rule_add(RuleAddParams(channel=channel, project_id="demo", task_id=task,
                                   events=events, **delays))


def older(n: Notify, run_id: str, ms: int) -> None:
    """Make a Run ``ms`` older: every time it carries moves back together."""
    n.sql("UPDATE runs SET created_at_ms = created_at_ms - ?, queued_at_ms = queued_at_ms - ?, "
          "scheduled_for_ms = scheduled_for_ms - ?, started_at_ms = started_at_ms - ? "
          "WHERE id = ?", (ms, ms, ms, ms, run_id))


def admit(n: Notify) -> str:
    n.admitted += 1
    if n.admitted == 1:
        n.base_ms = n.backend.now_ms() // 1000 * 1000
    return n.backend.admit("demo", "t1", n.base_ms - 1000 * n.admitted)


def keys(n: Notify, event: str) -> list[tuple[str, str]]:
    return [(r["channel"], r["source_key"]) for r in n.sql(
        "SELECT channel, source_key FROM notify_outbox WHERE event = ? "
        "ORDER BY channel, source_key", (event,))]


def document(n: Notify, event: str, run_id: str, channel: str = "ops") -> dict[str, Any]:
    [row] = n.sql("SELECT payload FROM notify_outbox WHERE event = ? AND run_id = ? "
                  "AND channel = ?", (event, run_id, channel))
    value = row["payload"]
    return json.loads(value) if isinstance(value, str) else dict(value)


def probe(n: Notify) -> Any:
    return n.runtime.outbox_probe(OutboxProbeParams(settle_ms=UNSETTLED))


# --- started and succeeded -------------------------------------------------------------------


def test_a_start_and_a_success_are_notified_once_per_run_and_channel(notify: Notify) -> None:
    n = notify
    publish(n.backend)
    for name in ("ops", "chat"):
        add_channel(n, name)
    rule(n, RuleEvent.STARTED, RuleEvent.SUCCEEDED)
    rule(n, RuleEvent.SUCCEEDED, channel="chat", task="job")
    rule(n, RuleEvent.FAILED, channel="chat")  # not started: chat is told of successes only
    n.backend.let_time_pass()
    assert n.enqueue() == 0
    run_id = admit(n)
    [lease] = acquire(n.backend)
    finish(n.backend, lease, SUCCEEDED)
    assert n.enqueue() == 3
    assert n.enqueue(SETTLED) == 0  # both looks, nothing twice
    assert keys(n, "run.started") == [("ops", f"run.started:{run_id}")]
    assert keys(n, "run.succeeded") == [("chat", f"run.succeeded:{run_id}"),
                                        ("ops", f"run.succeeded:{run_id}")]
    started = document(n, "run.started", run_id)
    assert started["run"]["status"] == "running" and started["run"]["attempts"] == 1
    assert started["run"]["finished_at_ms"] is None and started["run"]["exit_code"] is None
    assert started["title"] == "qinglong: demo/job started"
    assert "attempt 1" in started["summary"]
    done = document(n, "run.succeeded", run_id)
    assert done["run"]["status"] == "succeeded" and done["title"].endswith("succeeded")


def test_a_retried_run_is_started_once_and_its_failure_is_not_a_success(
        notify: Notify) -> None:
    n = notify
    publish(n.backend, retry=RETRIES)
    add_channel(n, "ops")
    rule(n, RuleEvent.STARTED, RuleEvent.SUCCEEDED)
    n.backend.let_time_pass()
    assert n.enqueue() == 0
    run_id = admit(n)
    [lease] = acquire(n.backend)
    finish(n.backend, lease, FAILED)  # attempt 1 fails: retry_wait
    n.backend.age_retries(RETRY_WAIT_OVER_MS)
    assert n.backend.lifecycle.retry_promote(10) == [run_id]
    [lease] = acquire(n.backend)
    assert lease.attempt == 2
    run_to_running(n.backend, lease.fence)  # the second attempt starts: still one run.started
    n.enqueue()
    assert n.enqueue(SETTLED) == 0
    assert keys(n, "run.started") == [("ops", f"run.started:{run_id}")]
    assert keys(n, "run.succeeded") == []
    assert document(n, "run.started", run_id)["run"]["attempts"] == 1  # the first one


def test_without_a_rule_for_them_starts_and_successes_cost_the_idle_probe_nothing(
        notify: Notify) -> None:
    n = notify
    publish(n.backend)
    add_channel(n, "ops")
    rule(n, RuleEvent.FAILED)
    n.backend.let_time_pass()
    n.enqueue()  # the cursors start
    for _ in range(3):
        admit(n)
    for lease in acquire(n.backend):
        finish(n.backend, lease, SUCCEEDED)
    found = probe(n)
    assert not found.progress and not found.enqueue  # nothing a rule wants
    assert n.enqueue() == 0
    # a rule made now sees what happens from now on, not the earlier successes
    n.backend.let_time_pass()
    rule(n, RuleEvent.SUCCEEDED)
    assert not probe(n).progress
    n.backend.let_time_pass()
    run_id = admit(n)
    [lease] = acquire(n.backend)
    finish(n.backend, lease, SUCCEEDED)
    assert probe(n).progress
    assert n.enqueue() == 1
    assert keys(n, "run.succeeded") == [("ops", f"run.succeeded:{run_id}")]


# --- the deadlines ---------------------------------------------------------------------------


def walk(n: Notify, event: RuleEvent, **params: Any) -> int:
    return n.runtime.outbox_walk(event.value, UnplaceableParams(**params)).enqueued


def test_a_run_still_running_after_the_delay_is_reported_once(notify: Notify) -> None:
    n = notify
    publish(n.backend)
    add_channel(n, "ops")
    add_channel(n, "slow")
    rule(n, RuleEvent.RUNNING_LONG)  # the default delay: 10 minutes
    rule(n, RuleEvent.RUNNING_LONG, channel="slow", running_long_after_ms=30 * MINUTE)
    run_id = admit(n)
    [lease] = acquire(n.backend)
    run_to_running(n.backend, lease.fence)
    assert not probe(n).running_long and walk(n, RuleEvent.RUNNING_LONG) == 0
    older(n, run_id, 9 * MINUTE)
    assert walk(n, RuleEvent.RUNNING_LONG) == 0  # not before the delay
    older(n, run_id, 2 * MINUTE)
    assert probe(n).walks == {"running_long"}  # (a walk never makes a cycle busy)
    assert walk(n, RuleEvent.RUNNING_LONG) == 1
    assert walk(n, RuleEvent.RUNNING_LONG) == 0  # once per Run and channel
    assert keys(n, "run.running_long") == [("ops", f"run.running_long:{run_id}")]
    doc = document(n, "run.running_long", run_id)
    assert doc["deadline"]["after_ms"] == 10 * MINUTE
    assert doc["deadline"]["waited_ms"] >= 11 * MINUTE
    assert doc["run"]["status"] == "running" and doc["run"]["attempts"] == 1
    assert doc["title"] == "qinglong: demo/job still running"
    older(n, run_id, 20 * MINUTE)
    assert walk(n, RuleEvent.RUNNING_LONG) == 1  # slow's delay runs out later
    n.backend.lifecycle.attempt_finish(AttemptFinishParams(fence=lease.fence,
                                                           outcome=SUCCEEDED))
    assert not probe(n).running_long  # ended: nothing more to walk


def test_a_run_not_started_after_its_scheduled_time_is_reported_once(notify: Notify) -> None:
    n = notify
    publish(n.backend)
    add_channel(n, "ops")
    rule(n, RuleEvent.LATE_START, late_start_after_ms=2 * MINUTE)
    started = admit(n)
    [lease] = acquire(n.backend)  # the oldest queued Run: this one
    assert lease.fence.run_id == started
    run_to_running(n.backend, lease.fence)
    late = admit(n)
    assert walk(n, RuleEvent.LATE_START) == 0 and not probe(n).late_start
    older(n, late, MINUTE)
    assert walk(n, RuleEvent.LATE_START) == 0  # not before the delay
    for run_id in (late, started):
        older(n, run_id, 2 * MINUTE)
    assert probe(n).late_start
    assert walk(n, RuleEvent.LATE_START) == 1
    assert walk(n, RuleEvent.LATE_START) == 0  # once per Run and channel
    assert keys(n, "run.late_start") == [("ops", f"run.late_start:{late}")]  # not the started
    doc = document(n, "run.late_start", late)
    assert doc["run"]["status"] == "queued" and doc["deadline"]["after_ms"] == 2 * MINUTE
    assert doc["deadline"]["since_ms"] == doc["run"]["scheduled_for_ms"]
    assert doc["title"] == "qinglong: demo/job has not started"


def test_the_walk_goes_a_page_at_a_time(notify: Notify) -> None:
    n = notify
    publish(n.backend)
    add_channel(n, "ops")
    rule(n, RuleEvent.LATE_START)
    runs = [admit(n) for _ in range(3)]
    for run_id in runs:
        older(n, run_id, 10 * MINUTE)
    report = n.runtime.outbox_walk("late_start", UnplaceableParams(limit=2))
    assert (report.examined, report.enqueued) == (2, 2) and report.next_after is not None
    report = n.runtime.outbox_walk("late_start", UnplaceableParams(after=report.next_after,
                                                                   limit=2))
    assert (report.examined, report.enqueued, report.next_after) == (1, 1, None)
    assert len(keys(n, "run.late_start")) == 3


# --- rules and their delays ------------------------------------------------------------------


def test_rules_keep_a_delay_per_event_and_refuse_one_without_its_event(notify: Notify) -> None:
    n = notify
    publish(n.backend)
    add_channel(n, "ops")
    rule(n, RuleEvent.FAILED, RuleEvent.RUNNING_LONG, RuleEvent.LATE_START,
         running_long_after_ms=45 * MINUTE)
    [made] = n.admin.rule_list("ops")
    assert (made.unplaceable_after_ms, made.running_long_after_ms,
            made.late_start_after_ms) == (None, 45 * MINUTE, 5 * MINUTE)
    rule(n, RuleEvent.LATE_START, late_start_after_ms=MINUTE)  # changes one, keeps the other
    [made] = n.admin.rule_list("ops")
    assert (made.running_long_after_ms, made.late_start_after_ms) == (45 * MINUTE, MINUTE)
    with pytest.raises(InvalidInput) as caught:
        rule(n, RuleEvent.FAILED, running_long_after_ms=MINUTE)
    assert caught.value.field == "running_long_after"
    with pytest.raises(InvalidInput) as caught:
        rule(n, RuleEvent.LATE_START, late_start_after_ms=1_000)
    assert caught.value.field == "late_start_after"
