"""Backfill: admit the past occurrences of a trigger that have no Run, each exactly once.

A backfill names a trigger, a window ``[from, to]`` (both ends included) and who asks. The
window is judged against the trigger's **current** revision: its occurrences are those of
that revision's schedule (cron, interval or one-shot), computed by the same code the scheduler uses. The
window must lie in the trigger's past as far as its schedule is concerned:

* it may start before the trigger was first published (the history of a job that ran
  elsewhere before, e.g. a migrated crontab), as early as the epoch;
* it must end before the **horizon**: the durable cursor of the trigger's schedule row (the
  first occurrence the live scheduler has not decided yet), or, while the row has no cursor,
  the current revision's publish time. Occurrences at or after it are the scheduler's to
  decide, so a backfill and the scheduler never both admit one; and since every occurrence
  before the cursor has fallen due, this also refuses the future;
* it must hold at most `MAX_OCCURRENCES` occurrences (backfill a longer stretch in parts).

Each occurrence is then admitted in its own transaction unless a Run already stands for it
(a scheduled Run, whatever revision admitted it, or an earlier backfill's): the Run's
idempotency key ``ql3:backfill:v1:<trigger>:<scheduled-for-ms>`` is unique within the
project, so a repeated or concurrent backfill admits nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from qinglong.domain.admission import (
    AdmissionIds,
    AdmissionRows,
    Origin,
    overlap_columns,
    queued_admission,
)
from qinglong.domain.identifiers import entity_id, project_id
from qinglong.domain.manual import actor_name
from qinglong.domain.occurrences import is_done_cursor
from qinglong.domain.runs import (
    EXECUTION_ORIGIN_BACKFILL,
    TRIGGER_TYPE_BACKFILL,
    Actor,
    backfill_idempotency_key,
)
from qinglong.domain.task import ExecutionRevision, TaskRevision
from qinglong.domain.trigger import TriggerRevision
from qinglong.errors import InvalidInput, InvalidSchedule

MAX_OCCURRENCES = 10_000
DEFAULT_RATE = 10.0  # admissions per second
MIN_RATE = 0.1
MAX_RATE = 1000.0


def utc_text(ms: int) -> str:
    """An instant for messages: RFC 3339 in UTC with milliseconds."""
    return (datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"))


def check_rate(rate: float, field: str = "rate") -> float:
    if (isinstance(rate, bool) or not isinstance(rate, int | float)
            or not MIN_RATE <= rate <= MAX_RATE):
        raise InvalidInput(field, f"must be between {MIN_RATE:g} and {MAX_RATE:g} admissions "
                                  "per second")
    return float(rate)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackfillRequest:
    """Admit the occurrences of ``trigger_id`` in ``[from_ms, to_ms]`` that have no Run."""

    project_id: str
    trigger_id: str
    from_ms: int
    to_ms: int
    actor: str

    def __post_init__(self) -> None:
        project_id(self.project_id)
        entity_id(self.trigger_id, "trigger")
        for name, value in (("from", self.from_ms), ("to", self.to_ms)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
                raise InvalidInput(name, "must be an instant (epoch milliseconds, 0 or later)")
        if self.from_ms > self.to_ms:
            raise InvalidInput("from", "must not be after --to")
        actor_name(self.actor)

    @property
    def target(self) -> str:
        return f"trigger {self.project_id}/{self.trigger_id}"

    def idempotency_key(self, occurrence_ms: int) -> str:
        return backfill_idempotency_key(self.trigger_id, occurrence_ms)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackfillTarget:
    """What a backfill's window is judged against, as the database holds it now."""

    trigger: TriggerRevision  # the current revision: enabled, pinning the task's current one
    cursor_ms: int | None  # the schedule row's cursor (None: no occurrence decided yet)

    @property
    def horizon_ms(self) -> int:
        """Occurrences at or after this instant are the live scheduler's to decide (a finished
        schedule has decided all of them: DONE_CURSOR_MS, after every occurrence)."""
        return self.cursor_ms if self.cursor_ms is not None else self.trigger.created_at_ms

    @property
    def finished(self) -> bool:
        """The scheduler has decided every occurrence of the current revision."""
        return is_done_cursor(self.cursor_ms)

    def horizon_text(self) -> str:
        if self.finished:
            return "the end of the trigger's schedule"
        if self.cursor_ms is not None:
            return (f"{utc_text(self.cursor_ms)}, the trigger's cursor (the first occurrence its "
                    "scheduler has not decided yet)")
        return (f"{utc_text(self.trigger.created_at_ms)}, when revision {self.trigger.revision} "
                "was published (its scheduler has not decided an occurrence of it yet)")


def window_occurrences(request: BackfillRequest, target: BackfillTarget) -> tuple[int, ...]:
    """The occurrences of the target's current schedule in the request's window, in order;
    InvalidInput (naming the option) when the window is not the trigger's past or too long.
    The trigger's first publish is no bound: a window may reach back before it."""
    if request.to_ms >= target.horizon_ms:
        raise InvalidInput("to", f"must be before {target.horizon_text()}: occurrences from "
                                 "then on are the scheduler's to decide")
    schedule = target.trigger.spec.schedule
    found: list[int] = []
    try:
        at = schedule.first_at_or_after(request.from_ms)
        while at is not None and at <= request.to_ms:
            if len(found) == MAX_OCCURRENCES:
                raise InvalidInput("to", f"the window holds more than {MAX_OCCURRENCES} "
                                         f"occurrences of {schedule.expression!r}; backfill "
                                         f"it in parts (the {MAX_OCCURRENCES}th is at "
                                         f"{utc_text(found[-1])}: --to {found[-1]})")
            found.append(at)
            at = schedule.next_after(at)
    except InvalidSchedule as exc:
        if "no further occurrence" not in exc.rule:
            raise
    return tuple(found)


def backfill_admission_rows(
    *,
    request: BackfillRequest,
    occurrence_ms: int,
    task: TaskRevision,
    trigger: TriggerRevision,
    execution: ExecutionRevision,
    ids: AdmissionIds,
    committed_at_ms: int,
) -> AdmissionRows:
    """The rows of the Run a backfill admits for one past occurrence: the shape of every
    admission (a queued Run, its claimed first Attempt, run.created and run.queued), for the
    occurrence's instant, carrying the trigger and its overlap policy like a scheduled Run,
    with who asked in ``triggered_by`` and as the actor (``user``) of both events."""
    payload: dict[str, object] = {
        "origin": EXECUTION_ORIGIN_BACKFILL,
        "requested_by": request.actor,
        "trigger_revision": trigger.revision,
        "trigger_content_digest": trigger.content_digest,
        "task_revision": task.revision,
        "task_content_digest": task.content_digest,
        "scheduled_for_ms": occurrence_ms,
        "backfill_from_ms": request.from_ms,
        "backfill_to_ms": request.to_ms,
    }
    return queued_admission(
        origin=Origin(trigger_type=TRIGGER_TYPE_BACKFILL,
                      execution_origin=EXECUTION_ORIGIN_BACKFILL, actor=Actor.USER,
                      actor_id=request.actor, triggered_by=request.actor),
        ids=ids, project_id=trigger.project_id, task_id=task.task_id, task_name=task.name,
        execution=execution, trigger_id=trigger.trigger_id, trigger_revision=trigger.revision,
        overlap=overlap_columns(trigger.spec.overlap, trigger.trigger_id),
        scheduled_for_ms=occurrence_ms, idempotency_key=request.idempotency_key(occurrence_ms),
        committed_at_ms=committed_at_ms, created_payload=payload,
        parameters=trigger.spec.values,  # the trigger's values, as its scheduled Runs have
    )
