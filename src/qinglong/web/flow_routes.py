"""Routes for flows (docs/controls/flows.md): publish a flow's revision, read flows, start one
(idempotent per client request id), list, show and cancel flow runs."""

from __future__ import annotations

from qinglong.domain.identifiers import entity_id, project_id
from qinglong.service.access import Reach
from qinglong.service.accounts import Level
from qinglong.service.views import flows as views
from qinglong.web import requests as rq
from qinglong.web.routing import Call, Endpoint, Query, Reply
from qinglong.web.runs import RUN_NOW, request_id

F = "/api/v1/projects/{project}/flows/{flow}"
FR = "/api/v1/flow-runs/{flow_run}"


def _flow(call: Call) -> tuple[str, str]:
    return project_id(call.path["project"]), entity_id(call.path["flow"], "flow")


def publish_flow(call: Call) -> Reply:
    project, flow = _flow(call)
    body: rq.FlowPublishRequest = call.body
    document = {"flow": flow, **body.model_dump(exclude_none=True, mode="json")}
    document["nodes"] = {node: value if isinstance(value, str)
                         else value.model_dump(exclude_none=True, mode="json")
                         for node, value in body.nodes.items()}
    for node in document["nodes"].values():
        if isinstance(node, dict) and node.get("after") == []:
            del node["after"]  # not given: a root
    view = call.backend.flows.publish(document, project)
    call.audit("flow.publish", project=project, target=f"flow {flow}",
               detail={"revision": view.revision, "created": view.created})
    return Reply(view, 201 if view.created else 200)


def list_flows(call: Call) -> Reply:
    return Reply(call.backend.flows.list_flows(project_id(call.path["project"])))


def show_flow(call: Call) -> Reply:
    return Reply(call.backend.flows.get(*_flow(call)))


def start_flow(call: Call) -> Reply:
    project, flow = _flow(call)
    flows = call.backend.flows
    view = flows.start(flows.request(project, flow, actor=call.who.username,
                                     request_id=request_id(call),
                                     parameters=call.body.parameters))
    call.audit("flow.run", project=project, target=f"flow {flow}",
               detail={"flow_run": view.id, "request_id": view.request_id,
                       "started": view.started})
    return Reply(view, 201 if view.started else 200)


def list_flow_runs(call: Call) -> Reply:
    q = call.query
    flow = None if q["flow"] is None else entity_id(q["flow"], "flow")
    return Reply(call.backend.flows.list_runs(project_id(q["project"]), flow, q["limit"]))


def show_flow_run(call: Call) -> Reply:
    return Reply(call.backend.flows.show(call.path["flow_run"]))


def cancel_flow_run(call: Call) -> Reply:
    view = call.backend.flows.cancel(call.path["flow_run"], call.who.username)
    call.audit("flow.cancel", project=view.project, target=f"flow run {view.id}",
               detail={"status": view.status})
    return Reply(view)


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/api/v1/projects/{project}/flows", list_flows, "List a project's flows at "
             "their current revision", "flows", Level.READ, response=views.FlowView, many=True),
    Endpoint("GET", F, show_flow, "Show a flow's current revision: its nodes, their tasks and "
             "edges", "flows", Level.READ, response=views.FlowView),
    Endpoint("POST", f"{F}/revisions", publish_flow, "Publish a flow revision: its graph and "
             "the current revision of every task it runs, pinned (the same content again: "
             "200, else 201)", "flows", Level.ADMIN, body=rq.FlowPublishRequest,
             response=views.FlowPublishView, also=(201,)),
    Endpoint("POST", f"{F}/run", start_flow, "Start a flow now: its first nodes' Runs are "
             "admitted with the flow run", "flows", Level.OPERATE, body=rq.RunNowRequest,
             response=views.FlowStartView, also=(201,), description=RUN_NOW.replace(
                 "the Run it admitted", "the flow run it started").replace(
                 "a new Run", "a new flow run")),
    Endpoint("GET", "/api/v1/flow-runs", list_flow_runs, "List a project's flow runs, newest "
             "first", "flows", Level.READ, response=views.FlowRunView, many=True,
             reach=Reach.LISTING,
             query=(Query("project", "str", "The project", required=True),
                    Query("flow", "str", "Only runs of this flow"),
                    Query("limit", "int", "At most this many", 1, 1000, default=50))),
    Endpoint("GET", FR, show_flow_run, "Show a flow run (a full id or a unique prefix): each "
             "node's state and Run", "flows", Level.READ, response=views.FlowRunView),
    Endpoint("POST", f"{FR}/cancel", cancel_flow_run, "Cancel a flow run: queued Runs end now, "
             "running ones are asked to stop, nodes not yet released never will be", "flows",
             Level.OPERATE, body=rq.Empty, response=views.FlowRunView),
)
