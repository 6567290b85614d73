"""What a rule can ask to be told about, and the event names the payload carries.

A rule names events in the short form (``failed``); the payload and the
``X-Qinglong-Event`` header carry the wire form (``run.failed``). Runs are notified when they
end: a failure the task's retry policy retries is not notified until the last attempt ends.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from qinglong.errors import InvalidInput


class RuleEvent(StrEnum):
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    CANCELLED = "cancelled"
    MISFIRED = "misfired"
    RECOVERED = "recovered"

    @property
    def wire(self) -> str:
        """``run.failed``; the misfire pair is about a trigger: ``trigger.misfired``."""
        return ("run." if self in RUN_EVENTS else "trigger.") + self.value


RUN_EVENTS = (RuleEvent.FAILED, RuleEvent.TIMED_OUT, RuleEvent.LOST, RuleEvent.CANCELLED)
TEST_EVENT = "notify.test"  # what `ql notify test` sends
# A rule without an explicit list: every failure and the misfire/recovery pair; cancellations
# are asked for explicitly (a `skip` overlap policy cancels a Run at every overlap).
DEFAULT_EVENTS = (RuleEvent.FAILED, RuleEvent.TIMED_OUT, RuleEvent.LOST, RuleEvent.MISFIRED,
                  RuleEvent.RECOVERED)
ALL_TASKS = "*"  # the task id of a rule that covers every task of its project


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
