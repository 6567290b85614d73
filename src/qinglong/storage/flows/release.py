"""Flow steps moved on inside the transaction that ends a node's Run (docs/controls/flows.md).

`FlowSteps.after_ended` is called by the lifecycle writer with every Run its write ended,
before COMMIT: each Run released as a flow step records its node's outcome, and the nodes
that outcome releases are admitted as Runs in the same transaction (each under the key of
its flow run and node, unique like every Run's, and moving its step row from pending to
released, which only one transaction can do). So a process that dies after a Run ended
either committed the release with it or committed neither: no step is lost or repeated.

The flow run's row is locked first (after the Runs, which the lifecycle locked before), so
two Runs of one fan-in ending in two transactions at once are recorded one after the
other, and the second sees the first's outcome. The flow store uses the same engine to start
a flow run (``move_on`` releases its roots) and to end one (``end``, for a cancel or a
timeout).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from qinglong.domain.admission import AdmissionIds, AdmissionRows, Origin, queued_admission
from qinglong.domain.flow import FlowRevision, step_idempotency_key
from qinglong.domain.flow_progress import (
    FlowStatus,
    NodeState,
    advance,
    node_outcome,
)
from qinglong.domain.runs import Actor, RunStatus
from qinglong.errors import Conflict, InvalidInput, RecordCorrupt
from qinglong.storage import records
from qinglong.storage.admission.writes import insert_admission
from qinglong.storage.dbapi import Row
from qinglong.storage.flow_records import flow_revision
from qinglong.storage.kernel import Tx

TRIGGER_TYPE_FLOW = "flow"
EXECUTION_ORIGIN_FLOW = "flow_step"
MAX_ERROR = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Releaser:
    """Who moves the flow on: recorded as the actor of the released Runs' events."""

    actor: Actor
    actor_id: str
    new_id: Callable[[], str]


class FlowSteps:
    def __init__(self, tx: Tx, releaser: Releaser) -> None:
        self._tx = tx
        self._releaser = releaser
        self._revisions: dict[tuple[str, str, int], FlowRevision] = {}
        self.holding: set[str] = set()  # flow runs being closed: record outcomes, release none

    # -- reading ------------------------------------------------------------------------

    def revision(self, project_id: str, flow_id: str, revision: int) -> FlowRevision:
        key = (project_id, flow_id, revision)
        found = self._revisions.get(key)
        if found is None:
            row = self._tx.one("flow_revision_get", {"project_id": project_id,
                                                     "flow_id": flow_id, "revision": revision})
            if row is None:
                raise RecordCorrupt(f"flow {project_id}/{flow_id}@{revision} is missing")
            found = self._revisions[key] = flow_revision(row)
        return found

    def lock(self, flow_run_id: str) -> Row | None:
        return self._tx.one("flow_run_lock", {"flow_run_id": flow_run_id})

    def states(self, flow_run_id: str) -> dict[str, NodeState]:
        return {row["node_id"]: NodeState(row["status"])
                for row in self._tx.all("flow_steps_get", {"flow_run_id": flow_run_id})}

    # -- the lifecycle's hook -----------------------------------------------------------

    def after_ended(self, ended: Sequence[tuple[str, RunStatus]], now_ms: int) -> None:
        """Record the outcome of each of these ended Runs that is a flow step, and move its
        flow run on (in the caller's transaction, which ended them)."""
        if not ended:
            return
        outcome = dict(ended)
        rows = self._tx.all("flow_steps_of_runs",
                            {"run_ids": self._tx.array(sorted(outcome))})
        by_flow: dict[str, list[Row]] = {}
        for row in rows:
            by_flow.setdefault(row["flow_run_id"], []).append(row)
        for flow_run_id in sorted(by_flow):  # one lock order for every transaction
            flow = self.lock(flow_run_id)
            if flow is None:
                continue
            for row in by_flow[flow_run_id]:
                self._tx.execute("flow_step_end", {
                    "flow_run_id": flow_run_id, "node_id": row["node_id"], "now_ms": now_ms,
                    "status": node_outcome(outcome[row["run_id"]]).value})
            if flow["status"] == FlowStatus.RUNNING.value and flow_run_id not in self.holding:
                try:
                    self.move_on(flow, now_ms)
                except RecordCorrupt as exc:  # its revision cannot be read: nothing can move
                    self.abandon(flow["id"], exc.message, now_ms)

    def abandon(self, flow_run_id: str, error: str, now_ms: int) -> None:
        """End a flow run whose graph cannot be read: its pending steps are skipped with the
        reason, and it fails (the Run that ended is recorded; it is not the one to block)."""
        for node_id, state in self.states(flow_run_id).items():
            if state is NodeState.PENDING:
                self._skip(flow_run_id, node_id, now_ms, error)
        self.end(flow_run_id, FlowStatus.FAILED, "nodes", now_ms)

    # -- moving a flow run on -----------------------------------------------------------

    def move_on(self, flow: Row, now_ms: int) -> None:
        """Release and skip what the flow run's steps now decide, and end it when nothing is
        left to run (``flow``: its locked row)."""
        revision = self.revision(flow["project_id"], flow["flow_id"], int(flow["flow_revision"]))
        values = json.loads(flow["parameters"]) if flow["parameters"] else {}
        rows = self._tx.all("flow_steps_get", {"flow_run_id": flow["id"]})
        # no earlier than any step's end: an ending that waited for the flow run's lock carries
        # the time it read before the wait, which may be before the other ending's
        now_ms = max([now_ms, *(int(r["ended_at_ms"]) for r in rows
                                if r["ended_at_ms"] is not None)])
        states = {row["node_id"]: NodeState(row["status"]) for row in rows}
        refused = any(row["error_summary"] for row in rows)  # a node that could not run
        while True:  # until nothing moves: a node refused at admission is skipped, which
            progress = advance(revision.spec, states)  # may decide the nodes after it
            if not progress.release and not progress.skip:
                break
            for node_id in progress.skip:
                self._skip(flow["id"], node_id, now_ms, None)
                states[node_id] = NodeState.SKIPPED
            for node_id in progress.release:
                try:
                    self.release(flow, revision, node_id, values, now_ms)
                    states[node_id] = NodeState.RELEASED
                except (RecordCorrupt, InvalidInput) as exc:  # refused before any write
                    self._skip(flow["id"], node_id, now_ms, exc.message)
                    states[node_id] = NodeState.SKIPPED
                    refused = True
        if progress.ended is not None:  # a node that could not be admitted fails the flow
            self.end(flow["id"], FlowStatus.FAILED if refused else progress.ended, "nodes",
                     now_ms)

    def refuse(self, flow_run_id: str, node_ids: Sequence[str], error: str,
               now_ms: int) -> None:
        """End a flow run that could not start: every node skipped with ``error``, the flow
        run ``failed`` (a trigger's occurrence whose flow cannot start is recorded so)."""
        for node_id in node_ids:
            self._skip(flow_run_id, node_id, now_ms, error)
        self.end(flow_run_id, FlowStatus.FAILED, "nodes", now_ms)

    def _skip(self, flow_run_id: str, node_id: str, now_ms: int, error: str | None) -> None:
        self._tx.execute("flow_step_skip", {
            "flow_run_id": flow_run_id, "node_id": node_id, "now_ms": now_ms,
            "error": None if error is None else error[:MAX_ERROR]})

    def end(self, flow_run_id: str, status: FlowStatus, reason: str, now_ms: int) -> None:
        self._tx.execute("flow_run_end", {"flow_run_id": flow_run_id, "status": status.value,
                                          "reason": reason, "now_ms": now_ms})

    def release(self, flow: Row, revision: FlowRevision, node_id: str,
                values: Mapping[str, object], now_ms: int) -> str:
        """Mark the step of ``node_id`` released and admit its Run; the Run's id. Its rows
        are built first (a refusal writes nothing), the step moved next (only a pending one
        moves), the Run inserted last."""
        rows = self.admission(flow, revision, node_id, values, now_ms)
        run_id = str(rows.run["id"])
        moved = self._tx.one("flow_step_release", {
            "flow_run_id": flow["id"], "node_id": node_id, "run_id": run_id, "now_ms": now_ms})
        if moved is None:  # (cannot happen under the flow run's lock: a defect, so loud)
            raise Conflict(f"step {node_id} of flow run {flow['id']} is not pending")
        insert_admission(self._tx, rows)
        self._tx.wake("runs")
        return run_id

    def admission(self, flow: Row, revision: FlowRevision, node_id: str,
                  values: Mapping[str, object], now_ms: int) -> AdmissionRows:
        """The rows of one node's Run (its task's pinned plan, the flow run's values for the
        parameters the task declares over the node's own)."""
        node = revision.spec.node(node_id)
        pin = revision.pins[node.task_id]
        executor_type = self._tx.capabilities.executor_type.value
        found = self._tx.one("manual_execution_revision", {
            "project_id": revision.project_id, "task_id": node.task_id,
            "source_revision": pin.revision, "executor_type": executor_type})
        if found is None:
            raise RecordCorrupt(f"execution revision of {revision.project_id}/{node.task_id}"
                                f"@{pin.revision} for {executor_type} is missing")
        execution = records.execution_revision(found)
        if execution.source_content_digest != pin.digest:
            raise RecordCorrupt(f"execution revision of {revision.project_id}/{node.task_id}"
                                f"@{pin.revision} does not match the revision the flow pins")
        declared = {p.name for p in execution.plan.parameters}
        given = {**node.parameters, **{k: v for k, v in values.items() if k in declared}}
        ids = AdmissionIds.new(self._releaser.new_id)
        key = step_idempotency_key(flow["id"], node_id)
        rows: AdmissionRows = queued_admission(
            origin=Origin(trigger_type=TRIGGER_TYPE_FLOW, execution_origin=EXECUTION_ORIGIN_FLOW,
                          actor=self._releaser.actor, actor_id=self._releaser.actor_id,
                          triggered_by=flow["id"]),
            ids=ids, project_id=revision.project_id, task_id=node.task_id, task_name=pin.name,
            execution=execution, trigger_id=None, trigger_revision=None,
            overlap={"overlap_policy": None, "overlap_key": None, "overlap_queue_limit": None},
            scheduled_for_ms=now_ms, idempotency_key=key, committed_at_ms=now_ms,
            created_payload={"origin": EXECUTION_ORIGIN_FLOW, "flow_run_id": flow["id"],
                             "flow_id": revision.flow_id, "flow_revision": revision.revision,
                             "node_id": node_id, "task_revision": pin.revision,
                             "task_content_digest": pin.digest, "scheduled_for_ms": now_ms},
            parameters=given)
        return rows
