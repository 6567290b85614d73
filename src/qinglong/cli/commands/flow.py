"""`ql flow`: publish flows (graphs of tasks), start them, follow and cancel their runs
(docs/controls/flows.md)."""

from __future__ import annotations

import click

from qinglong.cli.commands.manual import default_actor
from qinglong.cli.context import respond, services
from qinglong.cli.output import emit_table, say, when
from qinglong.cli.params import database_url_option, json_option, project_option
from qinglong.domain.flow import parse_flow
from qinglong.domain.flow_runs import FlowStart
from qinglong.domain.manual import actor_name, request_id
from qinglong.domain.parameters import parse_values
from qinglong.errors import InvalidInput
from qinglong.ids import new_uuid
from qinglong.service.flows import read_flow_file
from qinglong.service.views.flows import (
    EdgeView,
    FlowPublishView,
    FlowRunView,
    FlowStartView,
    FlowView,
)


@click.group()
def flow() -> None:
    """Flows: graphs of a project's tasks. Each node runs one task after the nodes it names
    (on their success, failure, or always), joining them with all or any; a flow run admits
    every node's Run exactly once, in the transaction that ends the Run before it."""


def _after(edges: list[EdgeView]) -> str:
    return ",".join(e.node if e.on == "success" else f"{e.node}:{e.on}" for e in edges) or "-"


def _say_flow(view: FlowView) -> None:
    say(f"flow {view.project}/{view.flow} revision {view.revision} ({view.name}); failure "
        f"policy {view.failure}" + (f", timeout {view.timeout_ms // 1000}s"
                                   if view.timeout_ms else ""))
    emit_table([(n.id, f"{n.task}@{n.task_revision}", _after(n.after),
                 n.join if n.after else "-") for n in view.nodes],
               ["NODE", "TASK", "AFTER", "JOIN"])


@flow.command("publish")
@click.option("-f", "--file", "path", required=True, metavar="FILE",
              help="The flow document (YAML or JSON): flow, name, failure, timeout, nodes.")
@click.option("--project", metavar="PROJECT",
              help="Project id (default: the document's project).")
@database_url_option
@json_option
def publish(path: str, project: str | None, database_url: str, as_json: bool) -> None:
    """Publish a flow: its graph, and the current revision of every task it runs (pinned;
    publish again after republishing a task). The same content again changes nothing."""
    document = read_flow_file(path)
    try:  # a problem in the file is named by its field there, not by an option's name
        parse_flow(document)
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.field}", exc.rule) from None

    def text(view: FlowPublishView) -> None:
        _say_flow(view)
        if not view.created:
            say("unchanged: this is already the current revision")

    respond(services(database_url), lambda s: s.flows.publish(document, project), as_json, text)


@flow.command("describe")
@project_option
@click.option("--flow", "flow_id", required=True, metavar="FLOW", help="Flow id.")
@database_url_option
@json_option
def describe(project: str, flow_id: str, database_url: str, as_json: bool) -> None:
    """Show a flow's current revision: its nodes, their tasks and edges."""
    respond(services(database_url), lambda s: s.flows.get(project, flow_id), as_json, _say_flow)


@flow.command("list")
@project_option
@database_url_option
@json_option
def list_flows(project: str, database_url: str, as_json: bool) -> None:
    """List a project's flows."""
    respond(services(database_url), lambda s: s.flows.list_flows(project), as_json,
            lambda views: emit_table(
                [(v.flow, v.revision, v.name, len(v.nodes), v.failure) for v in views],
                ["FLOW", "REVISION", "NAME", "NODES", "FAILURE"]))


def _starter(view: FlowRunView) -> str:
    if view.trigger is None:
        return view.requested_by
    return f"trigger {view.trigger} (its occurrence of {view.scheduled_for})"


def _say_run(view: FlowRunView) -> None:
    say(f"flow run {view.id} of {view.project}/{view.flow}@{view.revision}: {view.status}"
        + (f" ({view.ended_reason})" if view.ended_reason else "")
        + f", started by {_starter(view)} at {when(view.created_at_ms)}")
    if view.parameters:
        say("parameters: " + ", ".join(f"{k}={v}" for k, v in sorted(view.parameters.items())))
    emit_table([(s.node, s.task, s.state, (s.run or "-")[:13], s.run_status or "-",
                 s.error or ("cancel requested" if s.cancel_requested else ""))
                for s in view.steps], ["NODE", "TASK", "STATE", "RUN", "RUN STATUS", "NOTE"])


@flow.command("run")
@project_option
@click.option("--flow", "flow_id", required=True, metavar="FLOW", help="Flow id.")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="A value for a parameter of the flow's tasks (repeatable): every node whose "
                   "task declares NAME gets it. Refused, with nothing started, for a name no "
                   "task declares or a value of another type.")
@click.option("--request-id", "given_id", metavar="ID",
              help="Client request id (default: a new UUID, printed). The same id sent again "
                   "returns the flow run it started instead of starting another.")
@click.option("--actor", envvar="QL_ACTOR", metavar="NAME",
              help="Who asks (env QL_ACTOR; default: your OS user name).")
@database_url_option
@json_option
def run_flow(project: str, flow_id: str, params: tuple[str, ...], given_id: str | None,
             actor: str | None, database_url: str, as_json: bool) -> None:
    """Start FLOW now: its current revision, with the Runs of its first nodes admitted in the
    same transaction. Every task it runs must be enabled and at the revision the flow pins.
    Exit 0 also when the request id had already started this flow run."""
    start = FlowStart(project_id=project, flow_id=flow_id,
                      request_id=request_id(given_id or new_uuid(), "--request-id"),
                      actor=actor_name(actor or default_actor(), "--actor"),
                      parameters=parse_values(params))

    def text(view: FlowStartView) -> None:
        _say_run(view)
        if not view.started:
            say("already started by this request id: nothing new was started")
        if view.in_doubt:
            say("(the database's reply to COMMIT was lost; the flow run was found by its "
                "request id)")
        say(f"request id {start.request_id}: sending it again never starts a second flow run; "
            f"`ql flow show {view.id[:13]}` follows this one")

    respond(services(database_url), lambda s: s.flows.start(start), as_json, text)


@flow.command("show")
@click.argument("flow_run_id", metavar="FLOW_RUN_ID")
@database_url_option
@json_option
def show(flow_run_id: str, database_url: str, as_json: bool) -> None:
    """Show a flow run (its id, or a unique prefix): each node's state and Run."""
    respond(services(database_url), lambda s: s.flows.show(flow_run_id), as_json, _say_run)


@flow.command("runs")
@project_option
@click.option("--flow", "flow_id", metavar="FLOW", help="Only runs of this flow.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@database_url_option
@json_option
def runs(project: str, flow_id: str | None, limit: int, database_url: str,
         as_json: bool) -> None:
    """List a project's flow runs, newest first."""
    respond(services(database_url), lambda s: s.flows.list_runs(project, flow_id, limit),
            as_json, lambda views: emit_table(
                [(v.id[:13], v.flow, v.revision, v.status, v.ended_reason or "-",
                  when(v.created_at_ms),
                  v.requested_by if v.trigger is None else f"trigger {v.trigger}")
                 for v in views],
                ["ID", "FLOW", "REV", "STATUS", "REASON", "STARTED", "BY"]))


@flow.command("cancel")
@click.argument("flow_run_id", metavar="FLOW_RUN_ID")
@click.option("--actor", envvar="QL_ACTOR", metavar="NAME",
              help="Who cancels (env QL_ACTOR; default: your OS user name).")
@database_url_option
@json_option
def cancel(flow_run_id: str, actor: str | None, database_url: str, as_json: bool) -> None:
    """Cancel a running flow run: its queued Runs end now, running ones are asked to stop,
    nodes not yet released never will be."""
    who = actor_name(actor or default_actor(), "--actor")
    respond(services(database_url), lambda s: s.flows.cancel(flow_run_id, who), as_json,
            _say_run)
