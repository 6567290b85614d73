"""The audit of flows: every step a flow run released was admitted once, and every step the
graph made due was released (or its fate is explained), judged from the database alone.

- F1 once: a released step has exactly one Run under its key (``ql3:flow-step:v1:<flow
  run>:<node>``), that Run is the step's, and no Run carries a flow step's key without its
  step naming it;
- F2 due: a step was released only when its edges allowed it (every edge satisfied for
  ``all``, one for ``any``; under ``stop``, no ``success`` edge after a failure) or it is a
  root; a skipped step had a dead edge, a skip reason recorded with it, or its flow run was
  cancelled or timed out;
- F3 not lost: in a running flow run, no step whose edges allow it is still pending, and no
  step is still ``released`` after its Run ended (each is moved on in the transaction that
  ends the Run, so either is a lost step);
- F4 outcome: an ended flow run has no step pending or running a Run, and ended ``failed``
  exactly when a node failed or could not be admitted (or its timeout struck), ``succeeded``
  otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qinglong.domain.flow import FailurePolicy, FlowRevision, Join, step_idempotency_key
from qinglong.domain.flow_progress import (
    FlowStatus,
    NodeState,
    advance,
    edge_state,
    node_outcome,
)
from qinglong.domain.runs import ENDED_RUN, RunStatus
from qinglong.errors import RecordCorrupt
from qinglong.storage.flow_records import flow_revision
from qinglong.storage.kernel import Tx


@dataclass(slots=True)
class FlowReport:
    flow_runs: int = 0
    running: int = 0
    steps_released: int = 0
    steps_skipped: int = 0
    once: list[str] = field(default_factory=list)  # F1
    due: list[str] = field(default_factory=list)  # F2
    lost: list[str] = field(default_factory=list)  # F3
    outcome: list[str] = field(default_factory=list)  # F4

    @property
    def violations(self) -> int:
        return len(self.once) + len(self.due) + len(self.lost) + len(self.outcome)

    def findings(self) -> dict[str, list[str]]:
        return {"F1 each released step admitted once": self.once,
                "F2 released only when due": self.due,
                "F3 no step lost": self.lost,
                "F4 flow run outcome": self.outcome}


def check_flows(tx: Tx, *, from_ms: int, to_ms: int, project_id: str | None = None) -> FlowReport:
    """Judge F1-F4 over the flow runs started in [from_ms, to_ms] (of one project, or all)."""
    report = FlowReport()
    window = {"from_ms": from_ms, "to_ms": to_ms, "project_id": project_id}
    steps: dict[str, list[Any]] = {}
    for row in tx.all("audit_flow_steps", window):
        steps.setdefault(row["flow_run_id"], []).append(row)
    keyed: dict[str, list[str]] = {}
    for row in tx.all("audit_flow_step_runs", window):
        keyed.setdefault(str(row["idempotency_key"]), []).append(str(row["id"]))
    revisions: dict[tuple[str, str, int], FlowRevision | None] = {}
    named: set[str] = set()
    for flow in tx.all("audit_flow_runs", window):
        report.flow_runs += 1
        key = (flow["project_id"], flow["flow_id"], int(flow["flow_revision"]))
        if key not in revisions:
            found = tx.one("flow_revision_get", {"project_id": key[0], "flow_id": key[1],
                                                 "revision": key[2]})
            try:
                revisions[key] = None if found is None else flow_revision(found)
            except RecordCorrupt:
                revisions[key] = None
        revision = revisions[key]
        mine = steps.get(flow["id"], [])
        named.update(step_idempotency_key(flow["id"], s["node_id"]) for s in mine)
        if revision is None:
            report.outcome.append(f"flow run {flow['id']}: its revision {key} is missing or "
                                  "corrupt")
            continue
        _judge(report, flow, revision, mine, keyed)
    for run_key, runs in sorted(keyed.items()):
        if run_key not in named:
            report.once.append(f"{', '.join(runs)}: key {run_key} names no step of a flow run "
                               "in the window")
    return report


def _judge(report: FlowReport, flow: Mapping[str, Any], revision: FlowRevision,
           rows: list[Any], keyed: Mapping[str, list[str]]) -> None:
    flow_id = flow["id"]
    status = FlowStatus(flow["status"])
    report.running += status is FlowStatus.RUNNING
    spec = revision.spec
    by_node = {r["node_id"]: r for r in rows}
    if set(by_node) != {n.node_id for n in spec.nodes}:
        report.outcome.append(f"flow run {flow_id}: its steps are not its revision's nodes")
        return
    states: dict[str, NodeState] = {}
    for node_id, row in by_node.items():
        state = NodeState(row["status"])
        states[node_id] = state
        key = step_idempotency_key(flow_id, node_id)
        runs = keyed.get(key, [])
        if state in (NodeState.PENDING, NodeState.SKIPPED):
            if runs:
                report.once.append(f"flow run {flow_id} node {node_id}: {state.value} but "
                                   f"Run {runs[0]} has its key")
            report.steps_skipped += state is NodeState.SKIPPED
            continue
        report.steps_released += 1
        if len(runs) != 1 or runs[0] != row["run_id"]:
            report.once.append(f"flow run {flow_id} node {node_id}: {len(runs)} Runs under its "
                               f"key {runs}, step names {row['run_id']}")
        run_status = row["run_status"]
        if run_status is not None and RunStatus(run_status) in ENDED_RUN:
            wanted = node_outcome(RunStatus(run_status))
            if state is NodeState.RELEASED:
                report.lost.append(f"flow run {flow_id} node {node_id}: its Run {row['run_id']} "
                                   f"ended {run_status} but the step was not moved on")
            elif state is not wanted:
                report.outcome.append(f"flow run {flow_id} node {node_id}: step {state.value}, "
                                      f"its Run ended {run_status}")
    _judge_graph(report, flow, revision, states, by_node)


def _judge_graph(report: FlowReport, flow: Mapping[str, Any], revision: FlowRevision,
                 states: dict[str, NodeState], rows: Mapping[str, Any]) -> None:
    """F2-F4 from the steps' states."""
    flow_id, status = flow["id"], FlowStatus(flow["status"])
    stopped_early = flow["ended_reason"] in ("cancelled", "timeout")
    failed = NodeState.FAILED in states.values()
    stopped = revision.spec.failure is FailurePolicy.STOP and failed
    for node in revision.spec.nodes:
        state, where = states[node.node_id], f"flow run {flow_id} node {node.node_id}"
        if node.root:
            continue
        # (the stop rule is not judged for a released node: the failure may have come after)
        edges = [edge_state(e, states, False) for e in node.after]
        if state in (NodeState.RELEASED, NodeState.SUCCEEDED, NodeState.FAILED):
            allowed = (all(e is True for e in edges) if node.join is Join.ALL
                       else any(e is True for e in edges))
            if not allowed:
                report.due.append(f"{where}: released, but its edges did not allow it")
        elif state is NodeState.SKIPPED and not stopped_early and not rows[node.node_id][
                "error_summary"]:
            final = [edge_state(e, states, stopped) for e in node.after]
            dead = (any(e is False for e in final) if node.join is Join.ALL
                    else all(e is False for e in final))
            if not dead:
                report.due.append(f"{where}: skipped, but its edges did not rule it out")
        elif state is NodeState.PENDING and status is not FlowStatus.RUNNING:
            report.outcome.append(f"{where}: pending in a flow run that ended")
    if status is FlowStatus.RUNNING:
        progress = advance(revision.spec, states)  # what the steps should have moved on to
        for node_id in (*progress.release, *progress.skip):
            report.lost.append(f"flow run {flow_id} node {node_id}: decided by its edges but "
                               "still pending")
        if progress.ended is not None:
            report.lost.append(f"flow run {flow_id}: every node decided, still running")
        return
    if any(s is NodeState.RELEASED for s in states.values()) and not stopped_early:
        report.outcome.append(f"flow run {flow_id}: ended {status.value} with a step running")
    if not stopped_early:
        refused = any(row["error_summary"] for row in rows.values())  # could not be admitted
        wanted = FlowStatus.FAILED if failed or refused else FlowStatus.SUCCEEDED
        if status is not wanted:
            report.outcome.append(f"flow run {flow_id}: ended {status.value}, its nodes say "
                                  f"{wanted.value}")
    elif (status, flow["ended_reason"]) not in ((FlowStatus.CANCELLED, "cancelled"),
                                                (FlowStatus.FAILED, "timeout")):
        report.outcome.append(f"flow run {flow_id}: ended {status.value} for "
                              f"{flow['ended_reason']}")
