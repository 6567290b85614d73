"""Flows (issue 21, item 1) at the stores, on every database: publishing pins the tasks a
flow runs; a flow run admits its roots, and the Run that ends a node releases the next ones
in the transaction that ends it (as ql_worker on PostgreSQL); each node is admitted once;
edges on success, failure and always; joins all and any; the stop and continue failure
policies; cancel cascades; a timeout fails the flow run; a request id starts a flow once;
and two Runs of one fan-in ending at the same moment release the join exactly once."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from qinglong.audit.flows import FlowReport, check_flows
from qinglong.domain.flow import parse_flow
from qinglong.domain.flow_progress import FlowStatus, NodeState
from qinglong.domain.flow_runs import FlowRun, FlowStart
from qinglong.domain.lifecycle import Outcome
from qinglong.domain.parameters import Parameter, ParamType
from qinglong.domain.runs import AttemptStatus, RunStatus
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import (
    Conflict,
    InvalidInput,
    LeaseLost,
    NotFound,
    NotRunnable,
    RequestIdConflict,
)
from qinglong.execution.reconciler import Reconciler
from qinglong.storage.definitions.params import ProjectCreateParams, TaskPublishParams
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.flow_store import FlowStore
from qinglong.storage.runs.params import (
    AttemptFinishParams,
    AttemptLease,
    AttemptRunningParams,
    LeaseAcquireParams,
    LeaseRescueParams,
    ReconcilePending,
)
from tests.contract.conftest import Backend, PgBackend
from tests.contract.test_manual_runs import manual_store

SUCCEEDED = Outcome(status=AttemptStatus.SUCCEEDED, exit_code=0)
FAILED = Outcome(status=AttemptStatus.FAILED, exit_code=3, error_code="EXIT_NONZERO")
DIAMOND = {"flow": "etl", "nodes": {
    "extract": "extract", "clean-a": {"task": "clean", "after": "extract"},
    "clean-b": {"task": "clean", "after": ["extract"]},
    "load": {"task": "load", "after": ["clean-a", "clean-b"]}}}


class Flows:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        admin = backend.database("ql_admin", "contract-flow-admin")
        runtime = backend.database("ql_runtime", "contract-flows")
        self.admin = FlowStore(admin, manual_store(backend, "ql_admin"), actor_id="admin")
        self.store = FlowStore(runtime, manual_store(backend), actor_id="contract")
        # Runs are leased and ended as a worker does (ql_worker on PostgreSQL)
        self.worker = RunStore(backend.database("ql_worker", "contract-flow-worker"),
                               actor_id="w1")
        self._requests = 0

    def publish(self, document: dict[str, object]) -> int:
        return self.admin.flow_publish(parse_flow(document), "demo").revision.revision

    def start(self, flow_id: str = "etl", request_id: str | None = None,
              **values: object) -> str:
        self._requests += 1
        return self.store.flow_start(FlowStart(
            project_id="demo", flow_id=flow_id, request_id=request_id or f"r-{self._requests}",
            actor="alice", parameters=values)).flow_run_id

    def show(self, flow_run_id: str) -> FlowRun:
        return self.store.flow_run_get(flow_run_id)

    def states(self, flow_run_id: str) -> dict[str, str]:
        return {s.node_id: s.state.value for s in self.show(flow_run_id).steps}

    def leases(self) -> dict[str, AttemptLease]:
        """Lease every queued Run, by the node it is a step of."""
        leases = self.worker.lease_acquire(LeaseAcquireParams(owner="w1", lease_ms=30_000,
                                                              limit=50))
        nodes = {}
        for lease in leases:
            [row] = self.backend.sql("SELECT node_id FROM flow_steps WHERE run_id = ?",
                                     lease.fence.run_id)
            nodes[str(row["node_id"])] = lease
        return nodes

    def end(self, lease: AttemptLease, outcome: Outcome = SUCCEEDED) -> None:
        self.worker.attempt_start(lease.fence)
        self.worker.attempt_running(AttemptRunningParams(
            fence=lease.fence, pid=4242, executor_handle="pid:4242:start:1", log_path="/tmp/l"))
        self.worker.attempt_finish(AttemptFinishParams(fence=lease.fence, outcome=outcome))

    def runs_per_node(self) -> dict[str, int]:
        rows = self.backend.sql("SELECT idempotency_key, count(*) AS n FROM runs "
                                "WHERE trigger_type = 'flow' GROUP BY idempotency_key")
        return {str(r["idempotency_key"]): int(r["n"]) for r in rows}


@pytest.fixture
def flows(backend: Backend) -> Iterator[Flows]:
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    for task in ("extract", "clean", "load", "alert"):
        d.task_publish(TaskPublishParams(project_id="demo", task_id=task, name=task,
                                         spec=CommandSpec(command=ShellCommand(command="true"))))
    d.task_publish(TaskPublishParams(
        project_id="demo", task_id="greet", name="greet",
        spec=CommandSpec(command=ShellCommand(command="true"), parameters=(
            Parameter(name="who", type=ParamType.STRING, default="world"),
            Parameter(name="count", type=ParamType.INTEGER, default=1)))))
    yield Flows(backend)


def test_a_diamond_releases_each_node_once_in_the_transaction_that_ends_the_one_before(
        flows: Flows) -> None:
    assert flows.publish(DIAMOND) == 1
    run = flows.start()
    assert flows.states(run) == {"extract": "released", "clean-a": "pending",
                                 "clean-b": "pending", "load": "pending"}
    flows.end(flows.leases()["extract"])
    assert flows.states(run) == {"extract": "succeeded", "clean-a": "released",
                                 "clean-b": "released", "load": "pending"}
    leased = flows.leases()
    assert sorted(leased) == ["clean-a", "clean-b"]
    flows.end(leased["clean-a"])
    assert flows.states(run)["load"] == "pending"  # a fan-in waits for every edge
    assert flows.leases() == {}
    flows.end(leased["clean-b"])
    assert flows.show(run).status is FlowStatus.RUNNING
    flows.end(flows.leases()["load"])
    shown = flows.show(run)
    assert shown.status is FlowStatus.SUCCEEDED and shown.ended_reason == "nodes"
    assert all(s.run_status == RunStatus.SUCCEEDED.value for s in shown.steps)
    assert sorted(flows.runs_per_node().values()) == [1, 1, 1, 1]
    # the released Runs are the flow's: their origin and who released them are recorded
    [row] = flows.backend.sql("SELECT trigger_type, triggered_by, execution_origin FROM runs "
                              "WHERE id = ?", shown.steps[2].run_id)
    assert (row["trigger_type"], row["triggered_by"], row["execution_origin"]) == (
        "flow", run, "flow_step")


def test_failure_and_always_edges_and_the_stop_policy(flows: Flows) -> None:
    flows.publish({"flow": "etl", "nodes": {
        "extract": "extract", "other": "clean",
        "load": {"task": "load", "after": "extract"},
        "after-other": {"task": "load", "after": "other"},
        "alert": {"task": "alert", "after": {"extract": "failure"}},
        "cleanup": {"task": "alert", "after": {"extract": "always"}}}})
    run = flows.start()
    leased = flows.leases()
    assert sorted(leased) == ["extract", "other"]
    flows.end(leased["extract"], FAILED)
    # under stop: the success edges are dead, failure and always edges are followed
    assert flows.states(run) == {
        "extract": "failed", "other": "released", "load": "skipped",
        "after-other": "pending", "alert": "released", "cleanup": "released"}
    flows.end(leased["other"])  # an independent branch: stopped too
    assert flows.states(run)["after-other"] == "skipped"
    for lease in flows.leases().values():
        flows.end(lease)
    shown = flows.show(run)
    assert shown.status is FlowStatus.FAILED
    assert sorted(flows.runs_per_node().values()) == [1, 1, 1, 1]


def test_continue_lets_independent_branches_finish_and_any_joins_on_one_edge(
        flows: Flows) -> None:
    flows.publish({"flow": "etl", "failure": "continue", "nodes": {
        "a": "extract", "b": "clean",
        "after-b": {"task": "load", "after": "b"},
        "either": {"task": "alert", "after": ["a", "b"], "join": "any"}}})
    run = flows.start()
    leased = flows.leases()
    flows.end(leased["a"], FAILED)
    assert flows.states(run)["either"] == "pending"  # a's edge is dead, b's still open
    flows.end(leased["b"])
    assert flows.states(run) == {"a": "failed", "b": "succeeded", "after-b": "released",
                                 "either": "released"}
    for lease in flows.leases().values():
        flows.end(lease)
    assert flows.show(run).status is FlowStatus.FAILED  # a node failed


def test_cancel_cascades_and_a_late_ending_releases_nothing(flows: Flows) -> None:
    flows.publish({"flow": "etl", "nodes": {
        "a": "extract", "b": "clean", "c": {"task": "load", "after": ["a", "b"]}}})
    run = flows.start()
    leased = flows.leases()
    flows.worker.attempt_start(leased["a"].fence)  # a starts, b stays leased, not started
    flows.worker.attempt_running(AttemptRunningParams(
        fence=leased["a"].fence, pid=4242, executor_handle="pid:4242:start:1",
        log_path="/tmp/l"))
    shown = flows.store.flow_cancel(run)
    assert shown.status is FlowStatus.CANCELLED and shown.ended_reason == "cancelled"
    steps = {s.node_id: s for s in shown.steps}
    assert steps["c"].state is NodeState.SKIPPED
    assert steps["a"].cancel_requested  # running: asked to stop
    assert steps["b"].cancel_requested
    flows.end(leased["a"])  # it finished anyway: nothing is released
    assert flows.states(run)["c"] == "skipped"
    assert flows.leases() == {}
    with pytest.raises(Conflict, match="already ended"):
        flows.store.flow_cancel(run)


def test_a_timeout_fails_the_flow_run_and_cancels_what_runs(flows: Flows) -> None:
    flows.publish({"flow": "etl", "timeout": "1s", "nodes": {
        "a": "extract", "b": {"task": "load", "after": "a"}}})
    run = flows.start()
    assert flows.store.flows_expire() == []
    flows.backend.pass_time(1_100)
    assert flows.store.flows_expire() == [run]
    shown = flows.show(run)
    assert (shown.status, shown.ended_reason) == (FlowStatus.FAILED, "timeout")
    steps = {s.node_id: s for s in shown.steps}
    assert steps["a"].run_status == RunStatus.CANCELLED.value  # queued: ended now
    assert steps["b"].state is NodeState.SKIPPED
    assert flows.store.flows_expire() == []


def test_the_reconciler_probe_finds_an_overdue_flow_run_and_its_cycle_ends_it(
        flows: Flows) -> None:
    """An idle reconciler cycle is one read: the probe says whether a flow run is past its
    timeout, and only then does the cycle look for them and end them."""
    probe = flows.backend.lifecycle
    reconciler = Reconciler(probe, grace_ms=60_000, expire_flows=flows.store.flows_expire)
    assert not probe.reconcile_pending(60_000).flows_overdue  # no flow run at all
    flows.publish({"flow": "etl", "timeout": "1s", "nodes": {"a": "extract"}})
    run = flows.start()
    flows.backend.pass_time(1_100)
    assert probe.reconcile_pending(60_000) == ReconcilePending(settle=False, flows_overdue=True)
    reconciler.run_cycle()
    shown = flows.show(run)
    assert (shown.status, shown.ended_reason) == (FlowStatus.FAILED, "timeout")
    assert not probe.reconcile_pending(60_000).flows_overdue  # ended: nothing overdue


def test_a_request_id_starts_a_flow_once(flows: Flows) -> None:
    flows.publish(DIAMOND)
    flows.publish({"flow": "other", "nodes": {"a": "extract"}})
    first = flows.start(request_id="nightly-1")
    assert flows.start(request_id="nightly-1") == first
    with pytest.raises(RequestIdConflict, match="already started flow etl"):
        flows.start("other", request_id="nightly-1")
    assert flows.runs_per_node() == {f"ql3:flow-step:v1:{first}:extract": 1}


def test_publishing_pins_tasks_and_checks_the_graph_and_its_values(flows: Flows) -> None:
    assert flows.publish(DIAMOND) == 1
    assert flows.publish(DIAMOND) == 1  # the same content: no new revision
    with pytest.raises(InvalidInput, match="demo/nope does not exist"):
        flows.publish({"flow": "bad", "nodes": {"a": "nope"}})
    with pytest.raises(InvalidInput, match=r"nodes\.a\.parameters"):
        flows.publish({"flow": "bad", "nodes": {"a": {"task": "greet",
                                                      "parameters": {"count": "x"}}}})
    with pytest.raises(NotFound):
        flows.store.flow_get("demo", "bad")
    # a task republished: the flow must be published again to run it
    flows.backend.definitions.task_publish(TaskPublishParams(
        project_id="demo", task_id="load", name="load",
        spec=CommandSpec(command=ShellCommand(command="echo v2"))))
    with pytest.raises(NotRunnable, match="publish the flow again"):
        flows.start()
    assert flows.runs_per_node() == {}
    assert flows.publish(DIAMOND) == 2
    assert flows.show(flows.start()).flow_revision == 2


def test_values_reach_the_nodes_whose_tasks_declare_them(flows: Flows) -> None:
    flows.publish({"flow": "hello", "nodes": {
        "first": {"task": "greet", "parameters": {"count": 3}},
        "second": {"task": "greet", "after": "first"}, "plain": "extract"}})
    with pytest.raises(InvalidInput, match="no task of flow hello declares"):
        flows.start("hello", nope="1")
    with pytest.raises(InvalidInput, match="not an integer"):
        flows.start("hello", count="many")
    assert flows.runs_per_node() == {}
    run = flows.start("hello", who="ql")
    leased = flows.leases()
    assert leased["first"].parameters == {"count": 3, "who": "ql"}
    assert leased["plain"].parameters == {}
    flows.end(leased["first"])
    assert flows.leases()["second"].parameters == {"count": 1, "who": "ql"}
    assert flows.show(run).parameters == {"who": "ql"}


def test_two_runs_of_a_fan_in_ending_at_once_release_the_join_once(
        pg_backend: PgBackend) -> None:
    """Both endings wait on the flow run's lock, held here, after each has ended its Run;
    released together, the second sees the first's outcome and the join is admitted once."""
    d = pg_backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    for task in ("extract", "clean", "load", "alert"):
        d.task_publish(TaskPublishParams(project_id="demo", task_id=task, name=task,
                                         spec=CommandSpec(command=ShellCommand(command="true"))))
    flows = Flows(pg_backend)
    flows.publish({"flow": "etl", "nodes": {
        "a": "extract", "b": "clean", "join": {"task": "load", "after": ["a", "b"]}}})
    run = flows.start()
    leased = flows.leases()
    workers = {node: RunStore(pg_backend.database("ql_worker", f"contract-race-{node}"),
                              actor_id=f"w-{node}") for node in ("a", "b")}
    for node, lease in leased.items():
        workers[node].attempt_start(lease.fence)
        workers[node].attempt_running(AttemptRunningParams(
            fence=lease.fence, pid=4242, executor_handle="pid:4242:start:1", log_path="/tmp/l"))
    errors: list[BaseException] = []

    def finish(node: str) -> None:
        try:
            workers[node].attempt_finish(AttemptFinishParams(fence=leased[node].fence,
                                                             outcome=SUCCEEDED))
        except BaseException as exc:  # reported below
            errors.append(exc)

    pg_backend.db.execute("SELECT 1")  # the helper's own connection exists, so this one
    holder = pg_backend.db.superuser()  # is another
    holder.execute("BEGIN")
    holder.execute("SELECT id FROM flow_runs WHERE id = %s FOR UPDATE", [run])
    threads = [threading.Thread(target=finish, args=(node,)) for node in ("a", "b")]
    for thread in threads:
        thread.start()
    waiting = ("SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
               "AND application_name LIKE 'contract-race-%%' AND datname = current_database()")
    blocked = 0
    while blocked < 2 and all(t.is_alive() for t in threads):  # until both endings wait on
        threading.Event().wait(0.01)  # the flow run's lock (or one got past it: a defect)
        blocked = int(pg_backend.db.execute(waiting)[0]["n"])  # type: ignore[call-overload]
    holder.execute("COMMIT")
    assert blocked == 2, "an ending did not wait for the flow run's lock"
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert flows.states(run) == {"a": "succeeded", "b": "succeeded", "join": "released"}
    assert flows.runs_per_node() == {f"ql3:flow-step:v1:{run}:{n}": 1 for n in ("a", "b", "join")}


def audit(flows: Flows) -> FlowReport:
    db = flows.backend.database("ql_runtime", "contract-flow-audit")
    return db.read("audit flows", lambda tx: check_flows(tx, from_ms=0, to_ms=2**62),
                   snapshot=True)


def test_the_audit_finds_every_step_once_and_names_a_lost_or_doubled_one(
        flows: Flows) -> None:
    flows.publish(DIAMOND)
    done = flows.start()
    for _ in range(3):  # extract, then both cleans, then load
        for lease in flows.leases().values():
            flows.end(lease)
    assert flows.show(done).status is FlowStatus.SUCCEEDED
    running = flows.start()
    flows.end(flows.leases()["extract"])
    clean = audit(flows)
    assert (clean.flow_runs, clean.running, clean.violations) == (2, 1, 0), clean.findings()
    assert clean.steps_released == 7
    # a step whose Run ended but was never moved on is a lost step
    flows.backend.sql("UPDATE flow_steps SET status = 'released', ended_at_ms = NULL "
                      "WHERE flow_run_id = ? AND node_id = 'clean-a'", running)
    flows.end(flows.leases()["clean-a"])  # (moves it on again: released -> succeeded)
    flows.backend.sql("UPDATE flow_steps SET status = 'released' WHERE flow_run_id = ? "
                      "AND node_id = 'clean-a'", running)
    found = audit(flows)
    assert [f for f in found.lost if "clean-a" in f and "not moved on" in f], found.findings()
    # a node released although an edge into it was open, whose upstream has a Run but no step
    flows.backend.sql("UPDATE flow_steps SET status = 'pending', run_id = NULL "
                      "WHERE flow_run_id = ? AND node_id = 'clean-b'", done)
    found = audit(flows)
    assert [f for f in found.once if "clean-b" in f], found.findings()
    assert [f for f in found.due if "load: released, but its edges" in f], found.findings()
    assert [f for f in found.outcome if "clean-b: pending in a flow run that ended" in f]


def test_the_reconciler_ending_a_lost_attempt_releases_the_next_nodes(flows: Flows) -> None:
    """A worker that dies mid-run never reports: the reconciler's rescue ends the Run lost,
    and that transaction records the node failed and releases its failure handler."""
    flows.publish({"flow": "etl", "nodes": {
        "a": "extract", "b": {"task": "load", "after": "a"},
        "h": {"task": "alert", "after": {"a": "failure"}}}})
    run = flows.start()
    lease = flows.leases()["a"]
    flows.worker.attempt_start(lease.fence)
    flows.worker.attempt_running(AttemptRunningParams(
        fence=lease.fence, pid=4242, executor_handle="pid:4242:start:1", log_path="/tmp/l"))
    flows.backend.age_leases(60_000)
    rescued = flows.backend.runs.lease_rescue(LeaseRescueParams(limit=10, grace_ms=0))
    assert [r.outcome for r in rescued] == ["lost"]
    assert flows.states(run) == {"a": "failed", "b": "skipped", "h": "released"}
    flows.end(flows.leases()["h"])
    assert flows.show(run).status is FlowStatus.FAILED
    assert sorted(flows.runs_per_node().values()) == [1, 1]
    # the late worker's finish is refused (its lease is gone) and releases nothing
    with pytest.raises(LeaseLost):
        flows.worker.attempt_finish(AttemptFinishParams(fence=lease.fence, outcome=SUCCEEDED))
    assert sorted(flows.runs_per_node().values()) == [1, 1]


def test_a_run_cancelled_alone_fails_its_node(flows: Flows) -> None:
    flows.publish({"flow": "etl", "failure": "continue", "nodes": {
        "a": "extract", "b": {"task": "load", "after": "a"},
        "h": {"task": "alert", "after": {"a": "failure"}}}})
    run = flows.start()
    [step] = [s for s in flows.show(run).steps if s.node_id == "a"]
    assert step.run_id is not None
    flows.backend.runs.acting_as("alice").run_cancel(step.run_id)
    assert flows.states(run) == {"a": "failed", "b": "skipped", "h": "released"}


def test_a_node_whose_plan_cannot_be_admitted_is_skipped_with_why_and_fails_the_flow(
        flows: Flows) -> None:
    flows.publish({"flow": "etl", "nodes": {
        "a": "extract", "b": {"task": "load", "after": "a"},
        "c": {"task": "alert", "after": {"b": "always"}}}})
    run = flows.start()
    assert flows.backend.tamper_execution_plan("echo-load-never", "x") == 0  # (a no-op)
    changed = flows.backend.tamper_execution_plan('"true"', '"false"')  # every plan's command
    assert changed >= 1
    flows.end(flows.leases()["a"])  # ends a: b's tampered plan is refused, not the ending
    shown = {s.node_id: s for s in flows.show(run).steps}
    assert shown["a"].state is NodeState.SUCCEEDED
    assert shown["b"].state is NodeState.SKIPPED and shown["b"].error, shown["b"]
    assert shown["c"].state is NodeState.SKIPPED
    assert flows.show(run).status is FlowStatus.FAILED
    found = audit(flows)
    assert found.violations == 0, found.findings()


def test_a_cancel_takes_the_runs_before_the_flow_run_so_an_ending_never_deadlocks(
        pg_backend: PgBackend) -> None:
    """A cancel and a worker's ending meet on one flow run: the cancel locks the flow run's
    Runs first (as every lifecycle step does), so the ending waits for the cancel's Run lock
    instead of holding it while waiting for the flow run: no deadlock is detected."""
    d = pg_backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="quick", name="quick",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="gpu", name="gpu", spec=CommandSpec(
        command=ShellCommand(command="true"), requires=("gpu",))))
    flows = Flows(pg_backend)
    flows.publish({"flow": "etl", "nodes": {"a": "quick", "x": "gpu",
                                            "c": {"task": "quick", "after": ["a", "x"]}}})
    run = flows.start()
    lease = flows.leases()["a"]  # x stays queued: no worker offers gpu
    flows.worker.attempt_start(lease.fence)
    flows.worker.attempt_running(AttemptRunningParams(
        fence=lease.fence, pid=4242, executor_handle="pid:4242:start:1", log_path="/tmp/l"))
    deadlocks = ("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
    before = int(pg_backend.db.execute(deadlocks)[0]["deadlocks"])  # type: ignore[call-overload]
    canceller = FlowStore(pg_backend.database("ql_runtime", "contract-lock-cancel"),
                          manual_store(pg_backend), actor_id="alice")
    finisher = RunStore(pg_backend.database("ql_worker", "contract-lock-finish"), actor_id="w1")
    errors: list[BaseException] = []

    def in_thread(work: Callable[[], object]) -> threading.Thread:
        def run_it() -> None:
            try:
                work()
            except BaseException as exc:  # reported below
                errors.append(exc)
        thread = threading.Thread(target=run_it)
        thread.start()
        return thread

    def blocked(name: str) -> bool:
        rows = pg_backend.db.execute(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND application_name = %s AND datname = current_database()", [name])
        return int(rows[0]["n"]) == 1  # type: ignore[call-overload]

    def wait_blocked(name: str, thread: threading.Thread) -> None:
        while not blocked(name):
            assert thread.is_alive(), errors
            threading.Event().wait(0.01)

    pg_backend.db.execute("SELECT 1")  # the helper's own connection exists, so this one
    holder = pg_backend.db.superuser()  # is another
    holder.execute("BEGIN")
    holder.execute("SELECT id FROM flow_runs WHERE id = %s FOR UPDATE", [run])
    cancelling = in_thread(lambda: canceller.flow_cancel(run))
    wait_blocked("contract-lock-cancel", cancelling)
    finishing = in_thread(lambda: finisher.attempt_finish(AttemptFinishParams(
        fence=lease.fence, outcome=SUCCEEDED)))
    wait_blocked("contract-lock-finish", finishing)
    holder.execute("COMMIT")
    cancelling.join(timeout=30)
    finishing.join(timeout=30)
    assert errors == []
    assert int(pg_backend.db.execute(deadlocks)[0]["deadlocks"]) == before  # type: ignore[call-overload]
    shown = {s.node_id: s for s in flows.show(run).steps}
    assert flows.show(run).status is FlowStatus.CANCELLED
    assert shown["x"].run_status == RunStatus.CANCELLED.value
    assert shown["a"].run_status == RunStatus.SUCCEEDED.value  # it finished after all
    assert shown["c"].state is NodeState.SKIPPED


def test_the_audit_of_one_project_judges_only_its_flow_runs(flows: Flows) -> None:
    flows.publish(DIAMOND)
    flows.start()
    db = flows.backend.database("ql_runtime", "contract-flow-audit-project")

    def judged(project: str | None) -> int:
        return db.read("audit flows", lambda tx: check_flows(
            tx, from_ms=0, to_ms=2**62, project_id=project), snapshot=True).flow_runs

    assert (judged(None), judged("demo"), judged("elsewhere")) == (1, 1, 0)
