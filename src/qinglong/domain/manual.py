"""Run now: one client request to run a task (or fire a trigger) once, outside its schedule.

A request names its target (a task, or a trigger and through it the task it is bound to),
who asked, and a client request id. The request id is the idempotency key of the Run it
admits (``ql3:manual:v1:<request id>``, unique within the project), so a request that is
sent again -- after a timeout, a lost reply, a crashed script -- finds the Run it admitted
the first time instead of admitting a second one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from qinglong.domain.identifiers import OWNER_ID, OWNER_ID_RULE, entity_id, matching, project_id
from qinglong.domain.runs import TRIGGER_TYPE_MANUAL, manual_idempotency_key
from qinglong.errors import InvalidInput

# A request id is chosen by the client as an owner id is: the same characters, as long.
REQUEST_ID, REQUEST_ID_RULE = OWNER_ID, OWNER_ID_RULE
MAX_ACTOR = 128


def request_id(value: str, field: str = "request-id") -> str:
    return matching(value, field, REQUEST_ID, REQUEST_ID_RULE)


def actor_name(value: str, field: str = "actor") -> str:
    """Who asked: a user name (or any label a script gives itself), printable, 1-128 chars."""
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_ACTOR:
        raise InvalidInput(field, f"must be 1-{MAX_ACTOR} characters")
    if value != value.strip():
        raise InvalidInput(field, "must not start or end with white space")
    if any(not ch.isprintable() for ch in value):
        raise InvalidInput(field, "must not contain control characters")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ManualRequest:
    """Run ``task_id`` now, or fire ``trigger_id`` now (exactly one of them)."""

    project_id: str
    request_id: str
    actor: str
    task_id: str | None = None
    trigger_id: str | None = None
    parameters: Mapping[str, object] = field(default_factory=dict)  # values a run now gives

    def __post_init__(self) -> None:
        project_id(self.project_id)
        if (self.task_id is None) == (self.trigger_id is None):
            raise InvalidInput("target", "name either a task or a trigger")
        if self.task_id is not None:
            entity_id(self.task_id, "task")
        if self.trigger_id is not None:
            entity_id(self.trigger_id, "trigger")
        request_id(self.request_id)
        actor_name(self.actor)

    @property
    def idempotency_key(self) -> str:
        return manual_idempotency_key(self.request_id)

    @property
    def target(self) -> str:
        """``task demo/hello`` or ``trigger demo/nightly``, for messages."""
        if self.trigger_id is not None:
            return f"trigger {self.project_id}/{self.trigger_id}"
        return f"task {self.project_id}/{self.task_id}"

    def admitted(self, *, trigger_type: str, task_id: str, trigger_id: str | None) -> bool:
        """Whether an existing Run with this request's key is what this request asks for
        (the same request sent again) rather than another target under a reused id."""
        if trigger_type != TRIGGER_TYPE_MANUAL:
            return False
        if self.trigger_id is not None:
            return trigger_id == self.trigger_id
        return trigger_id is None and task_id == self.task_id
