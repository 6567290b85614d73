"""What a rule can ask to be told about, and the event names the payload carries.

A rule names events in the short form (``failed``); the payload and the
``X-Qinglong-Event`` header carry the wire form (``run.failed``). Runs are notified when they
end: a failure the task's retry policy retries is not notified until the last attempt ends.
One event is about a Run that has not ended: ``unplaceable`` (``run.unplaceable``), a queued
Run whose required worker labels no live worker offers, once it has waited longer than the
rule's delay (docs/controls/placement.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from qinglong.domain.durations import format_duration
from qinglong.errors import InvalidInput


class RuleEvent(StrEnum):
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    CANCELLED = "cancelled"
    MISFIRED = "misfired"
    RECOVERED = "recovered"
    UNPLACEABLE = "unplaceable"

    @property
    def wire(self) -> str:
        """``run.failed``; the misfire pair is about a trigger: ``trigger.misfired``; a Run
        no live worker can take: ``run.unplaceable``."""
        return ("trigger." if self in TRIGGER_EVENTS else "run.") + self.value


# The events of a Run's ending (the run_events scan); the misfire pair, about a trigger.
RUN_EVENTS = (RuleEvent.FAILED, RuleEvent.TIMED_OUT, RuleEvent.LOST, RuleEvent.CANCELLED)
TRIGGER_EVENTS = (RuleEvent.MISFIRED, RuleEvent.RECOVERED)
TEST_EVENT = "notify.test"  # what `ql notify test` sends
# A rule without an explicit list: every failure, the misfire/recovery pair and a Run no live
# worker can take (a failure too: the Run will not run until someone starts a worker);
# cancellations are asked for explicitly (a `skip` overlap policy cancels a Run at every
# overlap).
DEFAULT_EVENTS = (RuleEvent.FAILED, RuleEvent.TIMED_OUT, RuleEvent.LOST, RuleEvent.MISFIRED,
                  RuleEvent.RECOVERED, RuleEvent.UNPLACEABLE)
ALL_TASKS = "*"  # the task id of a rule that covers every task of its project

# How long a queued Run no live worker can take waits before ``unplaceable`` is sent: a
# rule's own delay, 1 minute to 7 days. Less than a minute would report a Run whose worker
# is only restarting (a stopped worker offers nothing until it registers again).
MIN_UNPLACEABLE_AFTER_MS = 60_000
MAX_UNPLACEABLE_AFTER_MS = 7 * 86_400_000
DEFAULT_UNPLACEABLE_AFTER_MS = 300_000


UNPLACEABLE_AFTER_RANGE = (f"{format_duration(MIN_UNPLACEABLE_AFTER_MS)} to "
                           f"{format_duration(MAX_UNPLACEABLE_AFTER_MS)}")


def check_unplaceable_after(after_ms: int, field: str = "unplaceable_after") -> int:
    """A rule's delay before ``unplaceable`` is sent, in milliseconds (InvalidInput on
    ``field`` outside 1 minute to 7 days)."""
    if isinstance(after_ms, bool) or not isinstance(after_ms, int) or not (
            MIN_UNPLACEABLE_AFTER_MS <= after_ms <= MAX_UNPLACEABLE_AFTER_MS):
        raise InvalidInput(field, f"must be from {UNPLACEABLE_AFTER_RANGE} (got "
                                  f"{_shown(after_ms)})")
    return after_ms


def unplaceable_after(events: Iterable[RuleEvent], after_ms: int | None,
                      field: str = "unplaceable_after") -> int | None:
    """A delay given with a rule that asks for ``events``, checked (None: none was given;
    a new ``unplaceable`` rule then waits the default, an existing one keeps its own). A
    delay for a rule that does not ask for ``unplaceable`` would do nothing: refused."""
    if after_ms is None:
        return None
    if RuleEvent.UNPLACEABLE not in tuple(events):
        raise InvalidInput(field, "goes with the unplaceable event; add unplaceable to the "
                                  "events")
    return check_unplaceable_after(after_ms, field)


def delay_text(after_ms: int | None) -> str:
    """A rule's unplaceable delay as people write it (``5m``), ``-`` for none."""
    return "-" if after_ms is None else format_duration(after_ms)


def events_text(events: Iterable[RuleEvent], after_ms: int | None, *,
                with_delay: bool = False) -> str:
    """A rule's events as listed (``failed,unplaceable``); ``with_delay``, as said in a
    sentence: ``failed, unplaceable after 5m``."""
    if not with_delay:
        return ",".join(e.value for e in events)
    return ", ".join(f"{e.value} after {delay_text(after_ms)}" if e is RuleEvent.UNPLACEABLE
                     else e.value for e in events)


def _shown(value: object) -> str:
    return format_duration(value) if isinstance(value, int) and value >= 0 else repr(value)


def known_events() -> str:
    return ", ".join(e.value for e in RuleEvent)


def parse_events(values: Iterable[str], field: str = "events") -> tuple[RuleEvent, ...]:
    """``failed,lost`` (several values and commas both work) to events, in a stable order;
    ``all`` is every event."""
    wanted: set[RuleEvent] = set()
    for value in values:
        for word in value.split(","):
            name = word.strip().lower().replace("-", "_")
            if not name:
                continue
            if name == "all":
                wanted.update(RuleEvent)
                continue
            try:
                wanted.add(RuleEvent(name))
            except ValueError:
                raise InvalidInput(field, f"unknown event {word.strip()!r}; use {known_events()} "
                                          "(or all)") from None
    if not wanted:
        raise InvalidInput(field, f"name at least one event: {known_events()}")
    return tuple(e for e in RuleEvent if e in wanted)
