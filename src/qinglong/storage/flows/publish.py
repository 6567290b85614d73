"""Publishing a flow, inside the store's write transaction: the project must be active and
every task a node runs must exist; the current revision of each is pinned (its number,
digest and name), each node's parameter values are checked against what its task declares,
and a revision is appended only when the digest differs from the current one's (publishing
the same file again changes nothing, unless a task it runs was republished: then it
re-pins)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from qinglong.domain.canonical import canonical_json
from qinglong.domain.flow import FlowDocument, FlowRevision, TaskPin, pins_content
from qinglong.domain.parameters import Parameter, resolve
from qinglong.domain.stored_trigger import stored_spec
from qinglong.domain.task import TaskRevision
from qinglong.errors import Conflict, InvalidInput
from qinglong.storage import records
from qinglong.storage.admission.requests import active_project
from qinglong.storage.flow_records import flow_revision
from qinglong.storage.kernel import Tx


@dataclass(frozen=True, slots=True)
class FlowPublished:
    revision: FlowRevision
    created: bool  # False: the same content was already the current revision


def current_task(tx: Tx, project_id: str, task_id: str) -> TaskRevision | None:
    """The task's current revision (None: there is none, or it is deleted)."""
    row = tx.one("manual_task_current", {"project_id": project_id, "task_id": task_id})
    if row is None or row["h_deleted_at_ms"] is not None:
        return None
    return records.task_revision(row)


def check_node_parameters(document: FlowDocument, tasks: dict[str, TaskRevision]) -> None:
    for node in document.spec.nodes:
        if node.parameters:
            try:
                resolve(tasks[node.task_id].spec.parameters, node.parameters)
            except InvalidInput as exc:
                raise InvalidInput(f"nodes.{node.node_id}.parameters", exc.rule) from None


def check_values(revision: FlowRevision, values: Mapping[str, object],
                 declared: Mapping[str, tuple[Parameter, ...]]) -> None:
    """Each value must be for a parameter some node's task declares, and of its type for
    every node whose task declares it (checked before anything is written)."""
    known = {p.name for params in declared.values() for p in params}
    for name in sorted(values):
        if name not in known:
            raise InvalidInput(f"parameters.{name}", f"no task of flow {revision.flow_id} "
                                                     "declares this parameter")
    for node in revision.spec.nodes:
        params = declared[node.task_id]
        names = {p.name for p in params}
        given = {**node.parameters, **{k: v for k, v in values.items() if k in names}}
        try:
            resolve(params, given)
        except InvalidInput as exc:
            raise InvalidInput(f"parameters (node {node.node_id})", exc.rule) from None


def check_triggers(tx: Tx, revision: FlowRevision,
                   tasks: Mapping[str, TaskRevision]) -> None:
    """The values each trigger of this flow gives must fit its tasks as this revision runs
    them: a publish that would make a trigger's occurrences fail is refused, naming it."""
    declared = {task_id: task.spec.parameters for task_id, task in tasks.items()}
    for row in tx.all("flow_triggers_of_flow", {"project_id": revision.project_id,
                                                "flow_id": revision.flow_id}):
        spec, _ = stored_spec(str(row["spec_json"]))
        try:
            check_values(revision, spec.values, declared)
        except InvalidInput as exc:
            raise InvalidInput(
                f"trigger {row['trigger_id']}: {exc.field}",
                f"{exc.rule}; the trigger starts this flow with these values: change them "
                "first (`ql trigger publish --param`/`--no-params`)") from None


def publish(tx: Tx, document: FlowDocument, project_id: str, *, now_ms: int) -> FlowPublished:
    active_project(tx, project_id)
    tasks: dict[str, TaskRevision] = {}
    for node in document.spec.nodes:
        task = tasks.get(node.task_id) or current_task(tx, project_id, node.task_id)
        if task is None:
            raise InvalidInput(f"nodes.{node.node_id}.task", f"task {project_id}/"
                               f"{node.task_id} does not exist; publish it first")
        tasks[node.task_id] = task
    check_node_parameters(document, tasks)
    pins = {task_id: TaskPin(revision=t.revision, digest=t.content_digest, name=t.name)
            for task_id, t in tasks.items()}
    digest = document.spec.digest(flow_id=document.flow_id, name=document.name, pins=pins)
    row = tx.one("flow_current", {"project_id": project_id, "flow_id": document.flow_id})
    current = flow_revision(row) if row is not None else None
    if current is not None and current.content_digest == digest:
        return FlowPublished(revision=current, created=False)
    number = 1 if current is None else current.revision + 1
    key = {"project_id": project_id, "flow_id": document.flow_id, "now_ms": now_ms}
    if current is None:
        tx.execute("flow_head_insert", key)
    elif tx.one("flow_head_advance", {**key, "revision": number}) is None:
        raise Conflict(f"flow {document.flow_id!r} changed while it was published; publish "
                       "again")
    tx.execute("flow_revision_insert", {
        **key, "revision": number, "name": document.name,
        "spec_json": canonical_json(document.spec.content()),
        "pins_json": canonical_json(pins_content(pins)), "content_digest": digest})
    revision = FlowRevision(project_id=project_id, flow_id=document.flow_id, revision=number,
                            name=document.name, spec=document.spec, pins=pins,
                            content_digest=digest, created_at_ms=now_ms)
    check_triggers(tx, revision, tasks)
    return FlowPublished(revision=revision, created=True)
