"""Starting a flow run (docs/controls/flows.md), in the caller's transaction.

- ``start``: what `ql flow run` and the API do: the flow's current revision, once per client
  request id; every pinned task re-read (there, enabled, still the revision pinned) and the
  values checked before anything is written, a refusal raised.
- ``start_occurrence``: what the scheduler does for an occurrence of a trigger that starts a
  flow, in the transaction that admits the occurrence (storage/admission/writes.py): the
  same checks, once per occurrence; a refusal does not raise (the occurrence is admitted all
  the same, or it would be decided again and again) but is recorded as a flow run that ended
  ``failed`` at once, each of its nodes skipped with the reason.

Either way the flow run is written with a step row per node and its roots' Runs are admitted
(release.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from qinglong.domain.canonical import canonical_json
from qinglong.domain.flow import FlowRevision, occurrence_flow_key
from qinglong.domain.flow_progress import NodeState
from qinglong.domain.flow_runs import FlowOccurrence, FlowStart, FlowStarted
from qinglong.domain.parameters import Parameter
from qinglong.domain.parameters import text as param_text
from qinglong.domain.runs import Actor
from qinglong.errors import Conflict, InvalidInput, NotFound, NotRunnable, RequestIdConflict
from qinglong.ids import new_uuid
from qinglong.storage.admission.requests import active_project
from qinglong.storage.flow_records import flow_revision
from qinglong.storage.flows.publish import check_values, current_task
from qinglong.storage.flows.release import FlowSteps, Releaser
from qinglong.storage.kernel import Tx

NewId = Callable[[], str]


def find(tx: Tx, start: FlowStart, key: str) -> str | None:
    """The flow run this request started before (None: none); RequestIdConflict when its
    request id started another flow, or the same with other values."""
    row = tx.one("flow_run_by_key", {"project_id": start.project_id, "key": key})
    if row is None:
        return None
    if row["flow_id"] != start.flow_id:
        raise RequestIdConflict(
            f"request id {start.request_id!r} already started flow {row['flow_id']} (run "
            f"{row['id']}), not {start.flow_id}; use a new request id")
    stored = json.loads(row["parameters"]) if row["parameters"] else {}
    if {k: param_text(v) for k, v in stored.items()} != {
            k: param_text(v) for k, v in start.parameters.items()}:
        raise RequestIdConflict(
            f"request id {start.request_id!r} already started flow run {row['id']} with other "
            "parameter values; use a new request id")
    return str(row["id"])


def current_revision(tx: Tx, project_id: str, flow_id: str) -> FlowRevision:
    row = tx.one("flow_current", {"project_id": project_id, "flow_id": flow_id})
    if row is None:
        raise NotFound("flow", f"{project_id}/{flow_id}")
    return flow_revision(row)


def runnable(tx: Tx, revision: FlowRevision,
             values: Mapping[str, object]) -> None:
    """Refuse (NotRunnable, InvalidInput) a start of ``revision`` with ``values``: a pinned
    task deleted, disabled or moved on, or a value no node takes."""
    project_id, flow_id = revision.project_id, revision.flow_id
    declared: dict[str, tuple[Parameter, ...]] = {}
    for task_id, pin in sorted(revision.pins.items()):
        task = current_task(tx, project_id, task_id)
        if task is None:
            raise NotRunnable(f"task {project_id}/{task_id} of flow {flow_id} was deleted; "
                              "publish it, or a flow without it, first")
        if not task.enabled:
            raise NotRunnable(f"task {project_id}/{task_id} of flow {flow_id} is disabled; "
                              "`ql task enable` it first")
        if (task.revision, task.content_digest) != (pin.revision, pin.digest):
            raise NotRunnable(
                f"flow {project_id}/{flow_id} pins revision {pin.revision} of task {task_id}, "
                f"which is now at revision {task.revision}: publish the flow again "
                "(`ql flow publish`) to re-pin it")
        declared[task_id] = task.spec.parameters
    check_values(revision, values, declared)


def start(tx: Tx, request: FlowStart, key: str, flow_run_id: str, *,
          new_id: NewId) -> FlowStarted:
    existing = find(tx, request, key)
    if existing is not None:
        return FlowStarted(flow_run_id=existing, started=False)
    active_project(tx, request.project_id)
    revision = current_revision(tx, request.project_id, request.flow_id)
    runnable(tx, revision, request.parameters)
    _write(tx, revision, flow_run_id, key, request.actor, request.parameters, {},
           Releaser(actor=Actor.USER, actor_id=request.actor, new_id=new_id))
    return FlowStarted(flow_run_id=flow_run_id, started=True)


def start_occurrence(tx: Tx, occurrence: FlowOccurrence, flow_run_id: str, *,
                     new_id: NewId = new_uuid) -> FlowStarted:
    """Start the flow of one occurrence of a flow trigger (see the module docstring)."""
    key = occurrence_flow_key(occurrence.trigger_id, occurrence.trigger_revision,
                              occurrence.scheduled_for_ms)
    row = tx.one("flow_run_by_key", {"project_id": occurrence.project_id, "key": key})
    if row is not None:  # as a second Run of one occurrence would, its key refuses it
        raise Conflict(f"occurrence {key} has started flow run {row['id']} already")
    revision = current_revision(tx, occurrence.project_id, occurrence.flow_id)
    refusal = None
    try:
        runnable(tx, revision, occurrence.parameters)
    except (NotRunnable, InvalidInput) as exc:
        refusal = f"the trigger's occurrence could not start the flow: {exc.message}"
    evidence = {"trigger_id": occurrence.trigger_id,
                "trigger_revision": occurrence.trigger_revision,
                "scheduled_for_ms": occurrence.scheduled_for_ms,
                "claim_version": occurrence.claim_version,
                "claim_token": occurrence.claim_token}
    _write(tx, revision, flow_run_id, key, occurrence.actor, occurrence.parameters, evidence,
           Releaser(actor=Actor.SCHEDULER, actor_id=occurrence.actor, new_id=new_id),
           refusal=refusal)
    return FlowStarted(flow_run_id=flow_run_id, started=True)


def _write(tx: Tx, revision: FlowRevision, flow_run_id: str, key: str, actor: str,
           values: Mapping[str, object], evidence: Mapping[str, object], releaser: Releaser,
           *, refusal: str | None = None) -> None:
    now_ms = tx.now_ms()
    timeout = revision.spec.timeout_ms
    tx.execute("flow_run_insert", {
        "id": flow_run_id, "project_id": revision.project_id, "flow_id": revision.flow_id,
        "flow_revision": revision.revision, "idempotency_key": key, "requested_by": actor,
        "now_ms": now_ms,
        "parameters": canonical_json(dict(values)) if values else None,
        "deadline_at_ms": None if timeout is None else now_ms + timeout,
        "trigger_id": None, "trigger_revision": None, "scheduled_for_ms": None,
        "claim_version": None, "claim_token": None, **evidence})
    nodes = [n.node_id for n in revision.spec.nodes]
    tx.execute_many("flow_step_insert", [
        {"flow_run_id": flow_run_id, "node_id": node_id, "status": NodeState.PENDING.value,
         "run_id": None, "released_at_ms": None} for node_id in nodes])
    steps = FlowSteps(tx, releaser)
    flow = steps.lock(flow_run_id)
    assert flow is not None
    if refusal is not None:
        steps.refuse(flow_run_id, nodes, refusal, now_ms)
        return
    steps.move_on(flow, now_ms)
