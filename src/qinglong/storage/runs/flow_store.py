"""The flow store (docs/controls/flows.md), written once over the kernel.

- ``flow_publish``: append a revision of a flow, pinning the tasks it runs
  (storage/flows/publish.py); the same content again writes nothing.
- ``flow_start``: start the current revision once per client request id, in one
  transaction (storage/flows/start.py). A lost COMMIT reply is settled by looking the key
  up.
- ``flow_cancel``: cancel a flow run: the Runs of its released steps are cancelled (a
  queued one ends now, a running one is asked to stop), its pending steps skipped and the
  flow run ended -- ``cancelled``, or ``failed`` for its timeout (``flows_expire``).
- reads: a revision, the flows of a project, a flow run with its steps, recent flow runs.

Steps are moved on by whoever ends a node's Run, in that transaction (storage/flows/
release.py, called by the lifecycle writer).
"""

from __future__ import annotations

from collections.abc import Callable

from qinglong.domain.flow import FlowDocument, FlowRevision, flow_idempotency_key
from qinglong.domain.flow_progress import FlowStatus, NodeState
from qinglong.domain.flow_runs import FlowRun, FlowStart, FlowStarted
from qinglong.domain.identifiers import RUN_REF
from qinglong.domain.runs import Actor
from qinglong.errors import Conflict, InvalidInput, NotFound
from qinglong.ids import new_uuid
from qinglong.storage.admission import RequestAdmissions
from qinglong.storage.admission.requests import active_project
from qinglong.storage.flow_records import flow_revision, flow_run
from qinglong.storage.flows.publish import FlowPublished, publish
from qinglong.storage.flows.start import find
from qinglong.storage.flows.start import start as start_flow
from qinglong.storage.kernel import Database, Tx
from qinglong.storage.runs.lifecycle import LifecycleWriter

CANCEL_REASONS = {"cancelled": "user", "timeout": "timeout"}  # flow's reason -> the Runs'


class FlowStore:
    def __init__(self, db: Database, admissions: RequestAdmissions, *, actor_id: str,
                 new_id: Callable[[], str] = new_uuid) -> None:
        self._db = db
        self._admissions = admissions
        self._actor_id = actor_id
        self._new_id = new_id

    # -- publishing and reading flows ---------------------------------------------------

    def flow_publish(self, document: FlowDocument, project_id: str) -> FlowPublished:
        return self._db.write("publish flow", lambda tx: publish(
            tx, document, project_id, now_ms=tx.now_ms()))

    def flow_get(self, project_id: str, flow_id: str) -> FlowRevision:
        row = self._db.read("read flow", lambda tx: tx.one(
            "flow_current", {"project_id": project_id, "flow_id": flow_id}))
        if row is None:
            raise NotFound("flow", f"{project_id}/{flow_id}")
        return flow_revision(row)

    def flow_revision_get(self, project_id: str, flow_id: str, revision: int) -> FlowRevision:
        row = self._db.read("read flow", lambda tx: tx.one("flow_revision_get", {
            "project_id": project_id, "flow_id": flow_id, "revision": revision}))
        if row is None:
            raise NotFound("flow", f"{project_id}/{flow_id}@{revision}")
        return flow_revision(row)

    def flow_list(self, project_id: str) -> list[FlowRevision]:
        def read(tx: Tx) -> list[FlowRevision]:
            active_project(tx, project_id)
            return [flow_revision(r) for r in tx.all("flow_list", {"project_id": project_id})]

        return self._db.read("list flows", read)

    # -- flow runs ----------------------------------------------------------------------

    def flow_run_id(self, prefix: str) -> str:
        """The one flow run whose id starts with ``prefix`` (a full id or 8+ of its first
        characters; NotFound, or Conflict when two match)."""
        prefix = prefix.lower()
        if not RUN_REF.fullmatch(prefix):
            raise InvalidInput("flow run", "must be a flow run id (a UUID) or a prefix of 8 or "
                                           "more of its characters")
        rows = self._db.read("find flow run", lambda tx: tx.all("flow_run_find",
                                                               {"prefix": prefix}))
        if not rows:
            raise NotFound("flow run", prefix)
        if len(rows) > 1:
            raise Conflict(f"flow run id {prefix!r} is ambiguous: give more of it")
        return str(rows[0]["id"])

    def flow_run_get(self, flow_run_id: str) -> FlowRun:
        def read(tx: Tx) -> FlowRun:
            row = tx.one("flow_run_get", {"flow_run_id": flow_run_id})
            if row is None:
                raise NotFound("flow run", flow_run_id)
            return flow_run(row, tx.all("flow_steps_get", {"flow_run_id": flow_run_id}))

        return self._db.read("read flow run", read, snapshot=True)

    def flow_run_list(self, project_id: str, flow_id: str | None = None,
                      limit: int = 50) -> list[FlowRun]:
        rows = self._db.read("list flow runs", lambda tx: tx.all("flow_runs_list", {
            "project_id": project_id, "flow_id": flow_id, "limit": limit}))
        return [flow_run(r) for r in rows]

    def flow_start(self, start: FlowStart) -> FlowStarted:
        flow_run_id = self._new_id()
        key = flow_idempotency_key(start.request_id)
        hint = (f"run the same command again with --request-id {start.request_id}: it starts "
                "the flow at most once")

        def admit(tx: Tx) -> FlowStarted:
            return start_flow(tx, start, key, flow_run_id, new_id=self._new_id)

        def in_doubt() -> FlowStarted:
            found = self._admissions.look_up("start flow", hint,
                                             lambda tx: find(tx, start, key))
            return FlowStarted(flow_run_id=found, started=found == flow_run_id, in_doubt=True)

        return self._admissions.admit_by_key("start flow", admit, hint, in_doubt)

    def flow_cancel(self, flow_run_id: str, *, reason: str = "cancelled",
                    actor_id: str | None = None) -> FlowRun:
        """End a running flow run (``reason``: cancelled, or timeout), cancelling the Runs of
        its released steps; Conflict when it has already ended."""
        run_reason = CANCEL_REASONS[reason]

        def work(tx: Tx) -> None:
            writer = LifecycleWriter(tx, shared=self._db.capabilities.shared, actor=Actor.USER
                                     if reason == "cancelled" else Actor.RECONCILER,
                                     actor_id=actor_id or self._actor_id, new_id=self._new_id)
            flows = writer.flows
            flows.holding.add(flow_run_id)  # what ends now records its step, releases none
            first = tx.one("flow_run_get", {"flow_run_id": flow_run_id})
            if first is None:
                raise NotFound("flow run", flow_run_id)
            if first["status"] != FlowStatus.RUNNING.value:
                raise Conflict(f"flow run {flow_run_id} has already ended ({first['status']})")
            stopped: set[str] = set()
            with writer.flows_deferred():  # the lifecycle's lock order: the Runs, then the flow
                released = _released(tx, flow_run_id)
                tx.all("flow_cancel_lock_runs", {"run_ids": tx.array(released)})
                _stop_released(writer, released, run_reason, stopped)
                flow = flows.lock(flow_run_id)
                if flow is None or flow["status"] != FlowStatus.RUNNING.value:
                    raise Conflict(f"flow run {flow_run_id} has already ended"
                                   + (f" ({flow['status']})" if flow is not None else ""))
                # a step released between the first read and the lock (rare: its Run is
                # locked after the flow run here; a deadlock it meets is retried)
                _stop_released(writer, _released(tx, flow_run_id), run_reason, stopped)
            now_ms = tx.now_ms()
            for node_id, state in flows.states(flow_run_id).items():
                if state is NodeState.PENDING:
                    tx.execute("flow_step_skip", {"flow_run_id": flow_run_id,
                                                  "node_id": node_id, "now_ms": now_ms,
                                                  "error": None})
            flows.end(flow_run_id, FlowStatus.CANCELLED if reason == "cancelled"
                      else FlowStatus.FAILED, reason, now_ms)

        self._db.write("cancel flow run", work, isolation="read committed")
        return self.flow_run_get(flow_run_id)

    def flows_expire(self, limit: int = 16) -> list[str]:
        """End the running flow runs whose timeout has passed (the reconciler's verb)."""
        rows = self._db.read("find overdue flow runs", lambda tx: tx.all(
            "flow_runs_overdue", {"limit": limit, **tx.clock_args()}))
        ended = []
        for row in rows:
            try:
                self.flow_cancel(row["id"], reason="timeout")
            except Conflict:  # it ended meanwhile
                continue
            ended.append(str(row["id"]))
        return ended


def _released(tx: Tx, flow_run_id: str) -> list[str]:
    return sorted(row["run_id"] for row in tx.all("flow_steps_get", {"flow_run_id": flow_run_id})
                  if row["status"] == NodeState.RELEASED.value)


def _stop_released(writer: LifecycleWriter, released: list[str], reason: str,
                   stopped: set[str]) -> None:
    """Cancel each released step's Run not handled yet (one already ending is left be)."""
    for run_id in released:
        if run_id in stopped:
            continue
        stopped.add(run_id)
        try:
            if writer.cancel(run_id, reason) is None:
                writer.wake_cancel(run_id)
        except Conflict:  # it has ended, or is already being cancelled
            continue


