"""What a rule can ask to be told about, and the event names the payload carries.

A rule names events in the short form (``failed``); the payload and the
``X-Qinglong-Event`` header carry the wire form (``run.failed``). Runs are notified when they
end: a failure the task's retry policy retries is not notified until the last attempt ends.
Opt-in, never in ``DEFAULT_EVENTS``: ``started`` (``run.started``: a Run's attempt started,
the first one the rule saw) and ``succeeded`` (``run.succeeded``).

Three events are about a Run that has not ended, each after the rule's own delay (a state
the dispatcher walks, not a row it scans): ``unplaceable`` (``run.unplaceable``), a queued
Run whose required worker labels no live worker offers (docs/controls/placement.md);
``running_long`` (``run.running_long``), a Run still running that long after its attempt
started; ``late_start`` (``run.late_start``), a Run still queued, never started, that long
after its scheduled time (a manual Run: when it was asked for). Every event is sent at most once per
Run and channel.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
    STARTED = "started"
    SUCCEEDED = "succeeded"
    RUNNING_LONG = "running_long"
    LATE_START = "late_start"

    @property
    def wire(self) -> str:
        """``run.failed``; the misfire pair is about a trigger: ``trigger.misfired``; a Run
        no live worker can take: ``run.unplaceable``; ``run.started``, ``run.running_long``."""
        return ("trigger." if self in TRIGGER_EVENTS else "run.") + self.value


# The events of a Run's ending (the run_events scan); the misfire pair, about a trigger.
RUN_EVENTS = (RuleEvent.FAILED, RuleEvent.TIMED_OUT, RuleEvent.LOST, RuleEvent.CANCELLED)
# A Run's start and its success (a scan of their own: most Runs start and succeed, so a
# dispatcher looks at them only while a rule asks for one).
PROGRESS_EVENTS = (RuleEvent.STARTED, RuleEvent.SUCCEEDED)
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
# The events sent after a rule's delay, with their default delays: all take 1 minute to 7
# days (the walk that finds them runs every 15 s).
DELAYED: dict[RuleEvent, int] = {RuleEvent.UNPLACEABLE: DEFAULT_UNPLACEABLE_AFTER_MS,
                                 RuleEvent.RUNNING_LONG: 600_000,
                                 RuleEvent.LATE_START: DEFAULT_UNPLACEABLE_AFTER_MS}


def delay_field(event: RuleEvent) -> str:
    """The field that names ``event``'s delay (``running_long_after``)."""
    return f"{event.value}_after"


def check_delay(event: RuleEvent, after_ms: object, field: str | None = None) -> int:
    """A rule's delay before ``event`` is sent (InvalidInput on ``field`` outside 1 minute to
    7 days)."""
    name = field or delay_field(event)
    if isinstance(after_ms, bool) or not isinstance(after_ms, int) or not (
            MIN_UNPLACEABLE_AFTER_MS <= after_ms <= MAX_UNPLACEABLE_AFTER_MS):
        raise InvalidInput(name, f"must be from {UNPLACEABLE_AFTER_RANGE} (got "
                                 f"{_shown(after_ms)})")
    return after_ms


def delays_given(events: Iterable[RuleEvent],
                 given: Mapping[RuleEvent, int | None]) -> dict[RuleEvent, int]:
    """The delays given with a rule that asks for ``events``, checked; a delay of an event the
    rule does not ask for would do nothing: refused (on that delay's field)."""
    wanted = tuple(events)
    checked = {}
    for event, after_ms in given.items():
        if after_ms is None:
            continue
        if event not in wanted:
            raise InvalidInput(delay_field(event), f"goes with the {event.value} event; add "
                                                   f"{event.value} to the events")
        checked[event] = check_delay(event, after_ms)
    return checked


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
    """A rule's delay as people write it (``5m``), ``-`` for none."""
    return "-" if after_ms is None else format_duration(after_ms)


def events_text(events: Iterable[RuleEvent],
                delays: Mapping[RuleEvent, int | None] | int | None, *,
                with_delay: bool = False) -> str:
    """A rule's events as listed (``failed,unplaceable``); ``with_delay``, as said in a
    sentence: ``failed, unplaceable after 5m``. ``delays``: the rule's delay of each delayed
    event (an int: the unplaceable delay)."""
    if not with_delay:
        return ",".join(e.value for e in events)
    if not isinstance(delays, Mapping):
        delays = {RuleEvent.UNPLACEABLE: delays}
    return ", ".join(f"{e.value} after {delay_text(delays.get(e))}" if e in DELAYED
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
