"""What one admission writes: the Run, its first Attempt and two events.

A Run is admitted for a cron occurrence (`admission_rows`) or for a client request to run
now (`manual_admission_rows`); both have the same shape. Both storage adapters insert
exactly these rows, so SQLite and PostgreSQL agree on the shape of an admission.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from qinglong.domain.canonical import canonical_json
from qinglong.domain.decision import Decision
from qinglong.domain.manual import ManualRequest
from qinglong.domain.parameters import resolve, values_json
from qinglong.domain.runs import (
    EXECUTION_ORIGIN_MANUAL,
    EXECUTION_ORIGIN_SCHEDULED,
    EXECUTION_OWNER_RUNTIME,
    TRIGGER_TYPE_CRON,
    TRIGGER_TYPE_MANUAL,
    Actor,
    AttemptStatus,
    EventType,
    RunStatus,
    cron_idempotency_key,
)
from qinglong.domain.schedule import ClaimFence, ScheduleCandidate
from qinglong.domain.task import ExecutionRevision, TaskRevision
from qinglong.domain.trigger import Overlap, TriggerRevision
from qinglong.ids import MAX_INSTANT_MS, new_uuid, new_uuids, time_ordered_uuids


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionIds:
    run_id: str
    attempt_id: str
    created_event_id: str
    queued_event_id: str

    @classmethod
    def new(cls, new_id: Callable[[], str], *, at_ms: int | None = None) -> AdmissionIds:
        """Fresh ids from ``new_id``. With the default (random UUIDs) and an instant
        ``at_ms`` (the store's clock), the Run and its Attempt take time-ordered ids of that
        instant (ids.time_ordered_uuids; an instant no such id holds, before 1970, gets
        random ones); the events keep random ones (no index is keyed by an event's id)."""
        if new_id is new_uuid:  # drawn at once
            created, queued = new_uuids(2)
            if at_ms is None or not 0 <= at_ms <= MAX_INSTANT_MS:
                run_id, attempt_id = new_uuids(2)
            else:
                run_id, attempt_id = time_ordered_uuids(2, at_ms)
            return cls(run_id=run_id, attempt_id=attempt_id, created_event_id=created,
                       queued_event_id=queued)
        return cls(run_id=new_id(), attempt_id=new_id(), created_event_id=new_id(),
                   queued_event_id=new_id())


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionRows:
    run: dict[str, object]
    attempt: dict[str, object]
    events: tuple[dict[str, object], dict[str, object]]


def overlap_columns(overlap: Overlap, trigger_id: str) -> dict[str, object]:
    """What a Run carries of its trigger's overlap policy (the key the database's partial
    unique index keeps to one Run in progress per exclusive trigger)."""
    if not overlap.exclusive:
        return {"overlap_policy": None, "overlap_key": None, "overlap_queue_limit": None}
    return {"overlap_policy": overlap.policy.value, "overlap_key": trigger_id,
            "overlap_queue_limit": overlap.queue_limit}


@dataclass(frozen=True, slots=True, kw_only=True)
class Origin:
    """Where an admission comes from: the Run's type and origin, and who it names as the
    actor of its two events."""

    trigger_type: str
    execution_origin: str
    actor: Actor
    actor_id: str
    triggered_by: str | None


def queued_admission(
    *,
    origin: Origin,
    ids: AdmissionIds,
    project_id: str,
    task_id: str,
    task_name: str,
    execution: ExecutionRevision,
    trigger_id: str | None,
    trigger_revision: int | None,
    overlap: dict[str, object],
    scheduled_for_ms: int,
    idempotency_key: str,
    committed_at_ms: int,
    created_payload: dict[str, object],
    parameters: Mapping[str, object] | None = None,
) -> AdmissionRows:
    """The rows every admission writes, whatever asked for it: a queued Run, its claimed first
    Attempt, run.created (``created_payload`` after the common fields) and run.queued.
    ``parameters``: values a run now gives (the others, and every one of a scheduled or
    backfilled Run, are the task's defaults); a value the task does not declare, or of the
    wrong type, is refused before any row is built."""
    values = resolve(execution.plan.parameters, parameters or {})
    run = {
        "id": ids.run_id,
        "project_id": project_id,
        "task_id": task_id,
        "task_revision": execution.task_revision,
        "task_name": task_name,
        "task_snapshot_ref": execution.task_revision,
        "trigger_id": trigger_id,
        "trigger_revision": trigger_revision,
        "trigger_type": origin.trigger_type,
        "execution_origin": origin.execution_origin,
        "execution_owner": EXECUTION_OWNER_RUNTIME,
        "triggered_by": origin.triggered_by,
        "scheduled_for_ms": scheduled_for_ms,
        "status": RunStatus.QUEUED.value,
        "version": 2,
        "event_sequence": 2,
        "priority": 0,
        "idempotency_key": idempotency_key,
        "created_at_ms": committed_at_ms,
        "queued_at_ms": committed_at_ms,
        **overlap,
        # the worker labels the Run needs (JSON text; None: any worker), from the pinned plan
        "requires": canonical_json(list(execution.plan.requires)) if execution.plan.requires
        else None,
        "parameters": values_json(values),  # every parameter's value (None: the task has none)
    }
    attempt = {
        "id": ids.attempt_id,
        "run_id": ids.run_id,
        "attempt": 1,
        "status": AttemptStatus.CLAIMED.value,
        "executor_type": execution.executor_type.value,
        "callback_sequence": 0,
        "created_at_ms": committed_at_ms,
    }
    payload: dict[str, object] = {
        "status": RunStatus.CREATED.value,
        "version": 1,
        "execution_owner": EXECUTION_OWNER_RUNTIME,
        "executor_type": execution.executor_type.value,
        "execution_revision_digest": execution.content_digest,
        **created_payload,
    }
    created = {
        "id": ids.created_event_id,
        "run_id": ids.run_id,
        "sequence": 1,
        "type": EventType.RUN_CREATED.value,
        # no dedupe key: the Run is new, so its events cannot repeat (the Run's idempotency
        # key and its events' (run, sequence) are what is unique); a key would only cost an
        # index entry per event
        "dedupe_key": None,
        "actor_type": origin.actor.value,
        "actor_id": origin.actor_id,
        "attempt_id": None,
        "payload": payload,
        "created_at_ms": committed_at_ms,
    }
    queued = {
        "id": ids.queued_event_id,
        "run_id": ids.run_id,
        "sequence": 2,
        "type": EventType.RUN_QUEUED.value,
        "dedupe_key": None,
        "actor_type": origin.actor.value,
        "actor_id": origin.actor_id,
        "attempt_id": ids.attempt_id,
        "payload": {"from_status": "created", "to_status": "queued", "version": 2},
        "created_at_ms": committed_at_ms,
    }
    return AdmissionRows(run=run, attempt=attempt, events=(created, queued))


def admission_rows(
    *,
    candidate: ScheduleCandidate,
    decision: Decision,
    execution: ExecutionRevision,
    task_name: str,
    ids: AdmissionIds,
    committed_at_ms: int,
    actor_id: str,
    fence: ClaimFence | None = None,
) -> AdmissionRows:
    scheduled_for = decision.scheduled_for_ms
    assert scheduled_for is not None, "only an admit decision writes rows"
    payload: dict[str, object] = {
        "trigger_revision": candidate.trigger_revision,
        "trigger_content_digest": candidate.trigger_content_digest,
        "scheduled_for_ms": scheduled_for,
        "decided_at_ms": decision.observed_at_ms,
        "misfired": decision.misfired,
    }
    if fence is not None:
        payload["claim_owner"] = fence.owner
        payload["claim_token"] = fence.token
        payload["claim_version"] = fence.version
    return queued_admission(
        origin=Origin(trigger_type=TRIGGER_TYPE_CRON, execution_origin=EXECUTION_ORIGIN_SCHEDULED,
                      actor=Actor.SCHEDULER, actor_id=actor_id,
                      triggered_by=candidate.trigger_id),
        ids=ids, project_id=candidate.project_id, task_id=candidate.task_id,
        task_name=task_name, execution=execution, trigger_id=candidate.trigger_id,
        trigger_revision=candidate.trigger_revision,
        overlap=overlap_columns(candidate.spec.overlap, candidate.trigger_id),
        scheduled_for_ms=scheduled_for,
        idempotency_key=cron_idempotency_key(candidate.trigger_id, candidate.trigger_revision,
                                             scheduled_for),
        committed_at_ms=committed_at_ms, created_payload=payload,
        parameters=candidate.spec.values,  # checked against the pinned task when published
    )


def manual_admission_rows(
    *,
    request: ManualRequest,
    task: TaskRevision,
    trigger: TriggerRevision | None,
    execution: ExecutionRevision,
    ids: AdmissionIds,
    committed_at_ms: int,
) -> AdmissionRows:
    """The rows of a Run admitted because someone asked (`ql task run`, `ql trigger fire`).

    Its occurrence is the commit time, its idempotency key the client request id's, and who
    asked is recorded in ``triggered_by`` and as the actor (``user``) of both events. Fired
    through a trigger, it carries the trigger and its overlap policy, so the policy and the
    task's concurrency limit apply to it at dispatch like to any scheduled Run.
    """
    payload: dict[str, object] = {
        "origin": EXECUTION_ORIGIN_MANUAL,
        "request_id": request.request_id,
        "requested_by": request.actor,
        "task_revision": task.revision,
        "task_content_digest": task.content_digest,
        "scheduled_for_ms": committed_at_ms,
    }
    if trigger is not None:
        payload["trigger_revision"] = trigger.revision
        payload["trigger_content_digest"] = trigger.content_digest
    return queued_admission(
        origin=Origin(trigger_type=TRIGGER_TYPE_MANUAL, execution_origin=EXECUTION_ORIGIN_MANUAL,
                      actor=Actor.USER, actor_id=request.actor, triggered_by=request.actor),
        ids=ids, project_id=task.project_id, task_id=task.task_id, task_name=task.name,
        execution=execution,
        trigger_id=trigger.trigger_id if trigger is not None else None,
        trigger_revision=trigger.revision if trigger is not None else None,
        # a Run of no trigger has no overlap policy (the task's own limits still apply)
        overlap=(overlap_columns(trigger.spec.overlap, trigger.trigger_id) if trigger is not None
                 else {"overlap_policy": None, "overlap_key": None, "overlap_queue_limit": None}),
        scheduled_for_ms=committed_at_ms, idempotency_key=request.idempotency_key,
        committed_at_ms=committed_at_ms, created_payload=payload,
        # fired through a trigger: the trigger's values, over which the request's go
        parameters={**(trigger.spec.values if trigger is not None else {}),
                    **request.parameters},
    )
