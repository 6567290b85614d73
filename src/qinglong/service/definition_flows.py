"""Flows in definition files (``flows:`` beside ``tasks:`` and ``triggers:``; docs/controls/
apply.md): reading one, planning its publish, and writing it back for ``ql export``.

A flow's entry is its document without ``flow`` (the key is its id) and without ``project``
(the document's): ``name``, ``failure``, ``timeout`` and ``nodes``. It is checked as
``ql flow publish`` checks it; beyond that, every node's task must be defined in the files or
stored (and not deleted), and its parameter values must suit the task as the files define
it. A flow is published after the project's tasks and triggers (it pins the tasks' new
revisions); one whose graph, name and pins are what is stored writes nothing, and one a
file no longer names is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from qinglong.domain.durations import format_duration
from qinglong.domain.flow import FlowDocument, FlowNode, FlowRevision, parse_flow
from qinglong.domain.model import TaskView
from qinglong.domain.parameters import Parameter, resolve
from qinglong.errors import InvalidInput, NotFound
from qinglong.service.definition_fields import FieldChange
from qinglong.service.definition_model import DesiredFlow, DesiredProject, Issues, Where
from qinglong.service.definition_plan import PHASE_FLOWS, Action, Change, FlowPublishParams


def _plain(value: object) -> object:
    """A located YAML value as plain dicts and lists (what parse_flow reads)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def parse_flow_entry(project_id: str, flow_id: str, value: Mapping[str, Any], where: Where,
                     issues: Issues) -> DesiredFlow | None:
    plain = _plain(value)
    assert isinstance(plain, dict)
    for key in ("flow", "project"):
        if key in plain:
            issues.add(where, f"flows.{flow_id}.{key}", "is given by the file (the key is the "
                       "flow's id, the document's project its project): leave it out")
            return None
    try:
        document = parse_flow({"flow": flow_id, **plain})
    except InvalidInput as exc:
        issues.add(where, f"flows.{flow_id}.{exc.field}", exc.rule)
        return None
    return DesiredFlow(project_id=project_id, flow_id=flow_id, document=document, where=where,
                       path=f"flows.{flow_id}")


def _node_text(node: FlowNode) -> str:
    """One node as the plan shows it: ``load=load after clean-a:always join any {part=a}``."""
    text = f"{node.node_id}={node.task_id}"
    if node.after:
        text += " after " + "+".join(
            e.upstream + ("" if e.condition.value == "success" else f":{e.condition}")
            for e in sorted(node.after, key=lambda e: e.upstream))
        if node.join.value != "all":
            text += f" join {node.join}"
    if node.parameters:
        text += " {" + ", ".join(f"{k}={v!r}" for k, v in sorted(node.parameters.items())) + "}"
    return text


def flow_fields(name: str, document: FlowDocument) -> dict[str, object]:
    """The fields a plan compares and shows; ``nodes`` holds every node's task, edges, join
    and parameters, so any change to the graph is one."""
    spec = document.spec
    return {"name": name, "failure": spec.failure.value,
            "timeout": None if spec.timeout_ms is None else format_duration(spec.timeout_ms),
            "nodes": "; ".join(_node_text(n) for n in sorted(spec.nodes,
                                                             key=lambda n: n.node_id))}


def plan_flow(flow: DesiredFlow, want: DesiredProject, current: FlowRevision | None,
              tasks_now: Mapping[str, TaskView], republished: set[str],
              issues: Issues) -> tuple[str, tuple[FieldChange, ...], FlowPublishParams | None]:
    """The action (create, change, unchanged), the fields that change and what to publish;
    a node whose task is missing, or whose values do not suit it, is an issue."""
    document = flow.document
    assert document is not None
    ok = True
    for node in document.spec.nodes:
        declared: tuple[Parameter, ...] | None = None
        if node.task_id in want.tasks:
            declared = want.tasks[node.task_id].parameters
        elif node.task_id in tasks_now and tasks_now[node.task_id].deleted_at_ms is None:
            declared = tasks_now[node.task_id].revision.spec.parameters
        if declared is None:
            issues.add(flow.where, f"flows.{flow.flow_id}.nodes.{node.node_id}.task",
                       f"task {node.task_id!r} is not defined in project {want.project_id!r} "
                       "(define it under tasks)")
            ok = False
            continue
        try:
            resolve(declared, node.parameters)
        except InvalidInput as exc:
            issues.add(flow.where, f"flows.{flow.flow_id}.nodes.{node.node_id}.parameters",
                       exc.rule)
            ok = False
    if not ok:
        return "unchanged", (), None
    wanted = flow_fields(document.name, document)
    params = FlowPublishParams(project_id=want.project_id, document=document)
    if current is None:
        return "create", tuple(FieldChange(k, None, v) for k, v in wanted.items()
                               if v is not None), params
    stored = flow_fields(current.name, FlowDocument(flow_id=current.flow_id, name=current.name,
                                                    project_id=None, spec=current.spec))
    fields = [FieldChange(k, stored[k], v) for k, v in wanted.items() if stored[k] != v]
    stale = sorted(task_id for task_id, pin in current.pins.items()
                   if task_id in republished or (task_id in tasks_now and tasks_now[
                       task_id].revision.revision != pin.revision))
    if stale and current.spec.task_ids == document.spec.task_ids:
        fields.append(FieldChange("pins", "tasks " + ", ".join(stale) + " at older revisions",
                                  "their current revisions"))
    elif stale:
        fields.append(FieldChange("pins", "older task revisions", "the current ones"))
    if not fields:
        return "unchanged", (), None
    return "change", tuple(fields), params


def plan_flows(want: DesiredProject, list_flows: Callable[[str], list[FlowRevision]] | None,
               stored: bool, tasks_now: Mapping[str, TaskView],
               task_changes: Mapping[str, Change], issues: Issues) -> list[Change]:
    """A change for each flow the files name, published after the project's tasks."""
    if list_flows is None:
        issues.add(want.where, "flows", "flows cannot be applied here")
        return []
    current: dict[str, FlowRevision] = {}
    if stored:
        try:
            current = {r.flow_id: r for r in list_flows(want.project_id)}
        except NotFound:
            current = {}
    republished = {task_id for task_id, c in task_changes.items() if c.params is not None}
    changes = []
    for flow_id, flow in sorted(want.flows.items()):
        revision = current.get(flow_id)
        action, fields, params = plan_flow(flow, want, revision, tasks_now, republished, issues)
        changes.append(Change(kind="flow", project_id=want.project_id, item_id=flow_id,
                              action=Action(action), fields=fields, where=flow.where,
                              phase=PHASE_FLOWS, params=params,
                              revision=revision.revision if revision else None))
    return changes


def flow_document(flow: DesiredFlow) -> dict[str, Any]:
    """A flow's entry as a file states it (``ql export``)."""
    document = flow.document
    assert document is not None
    spec = document.spec
    doc: dict[str, Any] = {}
    if document.name != flow.flow_id:
        doc["name"] = document.name
    if spec.failure.value != "stop":
        doc["failure"] = spec.failure.value
    if spec.timeout_ms is not None:
        doc["timeout"] = format_duration(spec.timeout_ms)
    nodes: dict[str, Any] = {}
    for node in sorted(spec.nodes, key=lambda n: n.node_id):
        if node.root and not node.parameters:
            nodes[node.node_id] = node.task_id
            continue
        entry: dict[str, Any] = {"task": node.task_id}
        if node.after:
            if all(e.condition.value == "success" for e in node.after):
                entry["after"] = [e.upstream for e in node.after]
            else:
                entry["after"] = {e.upstream: e.condition.value for e in node.after}
            if node.join.value != "all":
                entry["join"] = node.join.value
        if node.parameters:
            entry["parameters"] = dict(node.parameters)
        nodes[node.node_id] = entry
    doc["nodes"] = nodes
    return doc


def exported_flow(revision: FlowRevision) -> DesiredFlow:
    return DesiredFlow(project_id=revision.project_id, flow_id=revision.flow_id,
                       document=FlowDocument(flow_id=revision.flow_id, name=revision.name,
                                             project_id=None, spec=revision.spec),
                       path=f"flows.{revision.flow_id}")
