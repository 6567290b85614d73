"""The unplaceable event's delay as a rule takes it (1 minute to 7 days, default 5 minutes,
only with the event), read from what people write (``10m``, ``1h30m``), and the document a
channel receives for a Run no live worker can take."""

from __future__ import annotations

import pytest

from qinglong.domain.durations import parse_duration_ms
from qinglong.domain.notify import payload
from qinglong.domain.notify.events import (
    DEFAULT_EVENTS,
    DEFAULT_UNPLACEABLE_AFTER_MS,
    MAX_UNPLACEABLE_AFTER_MS,
    MIN_UNPLACEABLE_AFTER_MS,
    RuleEvent,
    check_unplaceable_after,
    parse_events,
    unplaceable_after,
)
from qinglong.domain.notify.payload import NotifyEvent, PlacementFacts, RunFacts
from qinglong.errors import InvalidInput
from qinglong.storage.notify.params import OutboxProbe


@pytest.mark.parametrize(("text", "ms"), [("1m", 60_000), ("5m", 300_000), ("90s", 90_000),
                                          ("1h30m", 5_400_000), ("7d", 604_800_000),
                                          ("1.5h", 5_400_000)])
def test_a_delay_written_with_units_is_taken(text: str, ms: int) -> None:
    assert check_unplaceable_after(parse_duration_ms(text)) == ms
    assert unplaceable_after([RuleEvent.UNPLACEABLE], parse_duration_ms(text)) == ms


@pytest.mark.parametrize("text", ["soon", "5", "", "-5m", "5m30", "1m 1h"])
def test_a_delay_that_is_not_a_duration_is_refused_by_the_parser(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration_ms(text)


@pytest.mark.parametrize("ms", [0, 59_999, MAX_UNPLACEABLE_AFTER_MS + 1, -60_000])
def test_a_delay_out_of_range_is_refused_naming_the_range(ms: int) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_unplaceable_after(ms, "--unplaceable-after")
    assert caught.value.field == "--unplaceable-after"
    assert "from 1m to 7d" in caught.value.rule


@pytest.mark.parametrize("value", [True, 300_000.0, "5m", None])
def test_a_delay_that_is_not_whole_milliseconds_is_refused(value: object) -> None:
    with pytest.raises(InvalidInput):
        check_unplaceable_after(value)  # type: ignore[arg-type]


def test_the_bounds_and_the_default() -> None:
    assert (MIN_UNPLACEABLE_AFTER_MS, DEFAULT_UNPLACEABLE_AFTER_MS) == (60_000, 300_000)
    assert check_unplaceable_after(MIN_UNPLACEABLE_AFTER_MS) == MIN_UNPLACEABLE_AFTER_MS
    assert check_unplaceable_after(MAX_UNPLACEABLE_AFTER_MS) == MAX_UNPLACEABLE_AFTER_MS


def test_a_delay_goes_only_with_the_unplaceable_event() -> None:
    # none given: the store gives a new rule the default and keeps an existing one's
    assert unplaceable_after(DEFAULT_EVENTS, None) is None
    assert unplaceable_after([RuleEvent.FAILED], None) is None
    assert unplaceable_after(DEFAULT_EVENTS, 600_000) == 600_000  # the default list has it
    with pytest.raises(InvalidInput) as caught:
        unplaceable_after(parse_events(["failed,lost"]), 600_000)
    assert caught.value.field == "unplaceable_after" and "unplaceable" in caught.value.rule
    with pytest.raises(InvalidInput):
        unplaceable_after([RuleEvent.UNPLACEABLE], 1_000)


def test_the_event_is_named_and_asked_for_by_default() -> None:
    assert parse_events(["unplaceable"]) == (RuleEvent.UNPLACEABLE,)
    assert RuleEvent.UNPLACEABLE.wire == "run.unplaceable"
    assert RuleEvent.UNPLACEABLE in DEFAULT_EVENTS
    assert RuleEvent.UNPLACEABLE in parse_events(["all"])


def test_the_probes_unplaceable_answer_never_makes_it_busy() -> None:
    assert OutboxProbe(unplaceable=True).idle
    assert not OutboxProbe(unplaceable=True, deliver=True).idle


def test_the_document_of_a_run_no_live_worker_can_take() -> None:
    run = RunFacts(id="r9", status="queued", task_name="Train", origin="manual_user",
                   requested_by="alice", scheduled_for_ms=None, created_at_ms=1_799_913_600_000,
                   started_at_ms=None, finished_at_ms=None, attempts=0, exit_code=None,
                   error_code=None, error_summary=None, cancel_reason=None)
    facts = PlacementFacts(requires=("gpu", "region=us"),
                           reason="no live worker offers gpu, region=us",
                           queued_at_ms=1_799_913_600_000, waited_ms=432_123, after_ms=300_000)
    event = NotifyEvent(event="run.unplaceable", source_key="run.unplaceable:r9",
                        occurred_at_ms=1_799_914_032_123, project_id="demo", task_id="train",
                        trigger_id=None, run=run, placement=facts)
    doc = payload.build(event, delivery_id="d9", channel="ops")
    assert doc["title"] == "qinglong: demo/train waits for a worker"
    assert doc["summary"] == (
        "Run r9 of demo/train has been queued for 7m12s (longer than 5m): no live worker "
        "offers gpu, region=us. It stays queued until a worker with these labels runs "
        "(ql worker --labels).")
    assert doc["placement"] == {"requires": ["gpu", "region=us"],
                                "reason": "no live worker offers gpu, region=us",
                                "queued_at_ms": 1_799_913_600_000, "waited_ms": 432_123,
                                "after_ms": 300_000}
    assert doc["run"]["status"] == "queued" and doc["misfire"] is None
    values = payload.template_values(doc, secret=None, params={})
    assert (values["event"], values["status"], values["run_id"], values["error"]) == (
        "run.unplaceable", "queued", "r9", "no live worker offers gpu, region=us")
