"""The views of flows: a flow's revision with its graph, and a flow run with the step of
each node (its state, its Run and that Run's status)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from qinglong.domain.flow import FlowRevision, flow_request_id
from qinglong.domain.flow_runs import FlowRun
from qinglong.service.times import rfc3339
from qinglong.service.views.base import Instant, OptionalInstant, ViewModel, instant, one_of


class EdgeView(ViewModel):
    node: str
    on: Annotated[str, one_of("success", "failure", "always")]


class FlowNodeView(ViewModel):
    id: str
    task: str
    task_revision: int = Field(description="The revision of the task this flow revision runs")
    after: list[EdgeView]
    join: Annotated[str, one_of("all", "any")]
    parameters: dict[str, Any]


class FlowView(ViewModel):
    project: str
    flow: str
    revision: int
    name: str
    content_digest: str
    failure: Annotated[str, one_of("stop", "continue")]
    timeout_ms: int | None
    nodes: list[FlowNodeView]
    published_at: Instant


class FlowPublishView(FlowView):
    created: bool = Field(description="False: the same content was already the current "
                                      "revision")


class FlowStepView(ViewModel):
    node: str
    task: str
    state: Annotated[str, one_of("pending", "released", "succeeded", "failed", "skipped")]
    run: str | None = Field(description="The Run the node was released as")
    run_status: str | None
    cancel_requested: bool
    released_at: OptionalInstant
    ended_at: OptionalInstant
    error: str | None = Field(description="Why it was skipped without running, when it "
                                          "could not be admitted")


class FlowRunView(ViewModel):
    id: str
    project: str
    flow: str
    revision: int
    status: Annotated[str, one_of("running", "succeeded", "failed", "cancelled")]
    ended_reason: Annotated[str | None, one_of("nodes", "cancelled", "timeout", None)]
    requested_by: str
    request_id: str | None = Field(description="The client request id that started it (null: "
                                               "an occurrence of a trigger did)")
    trigger: str | None = Field(default=None, description="The trigger whose occurrence "
                                                          "started it")
    scheduled_for: OptionalInstant = Field(default=None, description="That occurrence")
    parameters: dict[str, Any]
    created_at: Instant
    created_at_ms: int
    deadline_at: OptionalInstant
    finished_at: OptionalInstant
    steps: list[FlowStepView]


class FlowStartView(FlowRunView):
    started: bool = Field(description="False: the request id had started this flow run before")
    in_doubt: bool


def flow_view(revision: FlowRevision) -> FlowView:
    spec = revision.spec
    return FlowView(
        project=revision.project_id, flow=revision.flow_id, revision=revision.revision,
        name=revision.name, content_digest=revision.content_digest, failure=spec.failure.value,
        timeout_ms=spec.timeout_ms, published_at=instant(revision.created_at_ms),
        nodes=[FlowNodeView(id=n.node_id, task=n.task_id,
                            task_revision=revision.pins[n.task_id].revision,
                            after=[EdgeView(node=e.upstream, on=e.condition.value)
                                   for e in n.after],
                            join=n.join.value, parameters=dict(n.parameters))
               for n in sorted(spec.nodes, key=lambda n: n.node_id)])


def flow_run_view(run: FlowRun, revision: FlowRevision) -> FlowRunView:
    tasks = {n.node_id: n.task_id for n in revision.spec.nodes}
    return FlowRunView(
        id=run.id, project=run.project_id, flow=run.flow_id, revision=run.flow_revision,
        status=run.status.value, ended_reason=run.ended_reason, requested_by=run.requested_by,
        request_id=None if run.trigger_id is not None else flow_request_id(run.request_key),
        trigger=run.trigger_id, scheduled_for=rfc3339(run.scheduled_for_ms),
        parameters=dict(run.parameters), created_at=instant(run.created_at_ms),
        created_at_ms=run.created_at_ms,
        deadline_at=rfc3339(run.deadline_at_ms), finished_at=rfc3339(run.finished_at_ms),
        steps=[FlowStepView(node=s.node_id, task=tasks.get(s.node_id, "?"), state=s.state.value,
                            run=s.run_id, run_status=s.run_status,
                            cancel_requested=s.cancel_requested,
                            released_at=rfc3339(s.released_at_ms),
                            ended_at=rfc3339(s.ended_at_ms), error=s.error)
               for s in run.steps])
