"""Flows (docs/controls/flows.md, "Exactly once") under real faults: `ql worker` processes
frozen after a node's command finished and then killed (or let go late, once fenced out), a
lost COMMIT reply on the transaction that ends a node's Run and releases the next, and the
two Runs of a fan-in ending at the same moment on two workers. On PostgreSQL, with a `ql
control` replica (whose reconciler settles lost Attempts), and flows published and started
with `ql flow publish` / `ql flow run`.

Every command writes the worker bed's ledger (tests/faults/test_worker_faults.py: a line when
it starts, one when it ends, keyed by Run and Attempt; the task id stands in the trigger's
column). A gated command waits between the two for the test's go on a FIFO
(tests/faults/test_worker_step_batch_faults.py's Gate), so the test decides when it ends.

Each test judges the database: one Run per flow-step idempotency key
(``ql3:flow-step:v1:<flow run>:<node>``) of a released node and none for a skipped node, the
step rows' states and Runs, the flow run's ending, one ending event per Run, nothing left
active, ``ql flow show --json`` agreeing with all of it, and ``ql audit`` clean for flows
(F1-F4) and execution (E1-E5).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from qinglong.domain.flow import step_idempotency_key
from qinglong.domain.retry import RetryPolicy
from qinglong.domain.task import CommandSpec, EnvEntry, ShellCommand
from qinglong.storage.definitions.params import TaskPublishParams
from testkit.pgproxy import PgProxy, ProxyMode
from tests.faults.conftest import FaultBed, wait_for
from tests.faults.test_worker_faults import (
    ACTIVE_ATTEMPT,
    ENDED,
    ENDING_EVENTS,
    LOST_DUE_MS,
    RECONCILE_EVERY_MS,
    RECONCILE_GRACE_MS,
    WORKER_LEASE_MS,
    Process,
    WorkerBed,
    read_ledger,
    wait_db_time,
    worker_status,
)
from tests.faults.test_worker_step_batch_faults import (
    RESENT_BEFORE_MS,
    STEPS_ACTION,
    WORKER_APP,
    Gate,
    leases_renewed_at,
    outcome_unknown,
    quiet,
)
from tests.support.ql import Ql

pytestmark = pytest.mark.slow

PROJECT = "demo"
MAX_ROUNDS = 3  # lost-COMMIT rounds: another is run when the dropped reply was not the ending's
FAN_IN_ROUNDS = 3
LINK_DELAY_S = 0.05  # added to every reply to the fan-in's workers
# An ending's transaction makes five round trips or more after the statement that stamps it
# (its writes, the flow's steps of its Run, the flow run's lock, the step's outcome, the
# steps read again, COMMIT), each delayed by LINK_DELAY_S: two endings stamped less than this
# apart were in flight together.
OVERLAP_MS = int(LINK_DELAY_S * 1000) * 4

# The bed's ledger line at the start and at the end (the task id in the trigger's column),
# then exit 0; the first attempt of a gated task waits in between for one line from the
# test's FIFO (dash's `read` takes one byte at a time, so each command takes exactly one
# line). Nothing goes to stdout: no log shipping writes while a command runs.
SCRIPT = """\
line() { echo "$1 $QL_RUN_ID $QL_ATTEMPT_ID $$ $(date +%s%3N) $QL_TASK_ID $QL_ATTEMPT" >> "$LEDGER"; }
line start
if [ -n "$GATE" ] && [ "$QL_ATTEMPT" = 1 ]; then read -r go < "$GATE"; fi
line end
"""

KILL_FLOW = """\
flow: kill
nodes:
  a: ta
  b: {task: tb, after: a}
  h: {task: th, after: {a: failure}}
"""

COMMIT_FLOW = """\
flow: commit
nodes:
  a: ta
  b: {task: tb, after: a}
"""

FAN_IN_FLOW = """\
flow: fanin
nodes:
  l: gated
  r: gated
  join: {task: tj, after: [l, r]}
"""


@dataclass
class FlowBed:
    """The worker bed, a gate for the commands, and `ql` as an administrator (publishing)
    and as the runtime (starting and showing flow runs)."""

    wbed: WorkerBed
    gate: Gate
    admin: Ql
    runtime: Ql

    @property
    def bed(self) -> FaultBed:
        return self.wbed.bed

    # definitions and flow runs, through `ql`

    def task(self, task_id: str, *, gated: bool = False, idempotent: bool = False,
             retry: RetryPolicy | None = None) -> None:
        env = (EnvEntry(name="LEDGER", value=str(self.wbed.ledger)),
               EnvEntry(name="GATE", value=str(self.gate.path) if gated else ""))
        spec = CommandSpec(command=ShellCommand(command=SCRIPT, shell="/bin/sh"), environment=env,
                           retry=retry or RetryPolicy(), idempotent=idempotent)
        self.bed.admin.task_publish(TaskPublishParams(project_id=PROJECT, task_id=task_id,
                                                      name=task_id, spec=spec))

    def publish(self, document: str) -> None:
        path = self.bed.tmp / "flow.yaml"
        path.write_text(document)
        published = self.admin.json("flow", "publish", "-f", str(path), "--project", PROJECT)
        assert published["created"] is True, published

    def start(self, flow_id: str, request_id: str) -> str:
        started = self.runtime.json("flow", "run", "--project", PROJECT, "--flow", flow_id,
                                    "--request-id", request_id)
        assert started["started"] is True and started["status"] == "running", started
        return str(started["id"])

    def show(self, flow_run_id: str) -> dict[str, Any]:
        return dict(self.runtime.json("flow", "show", flow_run_id))

    # reading the database

    def flow_run(self, flow_run_id: str) -> dict[str, Any]:
        [row] = self.bed.rows("SELECT * FROM qinglong.flow_runs WHERE id = %s", [flow_run_id])
        return row

    def steps(self, flow_run_id: str) -> dict[str, dict[str, Any]]:
        return {str(r["node_id"]): r for r in self.bed.rows(
            "SELECT * FROM qinglong.flow_steps WHERE flow_run_id = %s", [flow_run_id])}

    def runs(self, flow_run_id: str) -> list[dict[str, Any]]:
        """Every Run of the flow run: released by it, or carrying one of its step keys."""
        return self.bed.rows(
            "SELECT id, status, idempotency_key, trigger_type, triggered_by, execution_origin, "
            "attempts_spent, created_at_ms, finished_at_ms FROM qinglong.runs "
            "WHERE triggered_by = %s OR idempotency_key LIKE %s ORDER BY created_at_ms, id",
            [flow_run_id, step_idempotency_key(flow_run_id, "%")])

    def run_of(self, flow_run_id: str, node: str) -> dict[str, Any] | None:
        key = step_idempotency_key(flow_run_id, node)
        found = [r for r in self.runs(flow_run_id) if r["idempotency_key"] == key]
        assert len(found) <= 1, found
        return found[0] if found else None

    def attempts(self, run_id: str) -> list[dict[str, Any]]:
        return self.wbed.attempts(run_id)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return self.wbed.events(run_id)

    def processes(self, run_id: str) -> list[Process]:
        return [p for p in read_ledger(self.wbed.ledger) if p.run_id == run_id]

    def ended(self, flow_run_id: str) -> dict[str, Any] | None:
        row = self.flow_run(flow_run_id)
        return row if row["status"] != "running" else None

    def nodes_ended(self, flow_run_id: str, *nodes: str) -> bool:
        runs = [self.run_of(flow_run_id, n) for n in nodes]
        return all(run is not None and run["status"] in ENDED for run in runs)

    def running_on(self, flow_run_id: str, node: str, worker: str) -> dict[str, Any] | None:
        """The node's Run once its command runs on ``worker`` and has written its start."""
        run = self.run_of(flow_run_id, node)
        if run is None or run["status"] != "running":
            return None
        attempt = self.attempts(run["id"])[-1]
        if attempt["status"] != "running" or not str(attempt["worker_id"]).startswith(
                f"{worker}:"):
            return None
        if not any(p.attempt_id == attempt["id"] for p in self.processes(run["id"])):
            return None
        return run

    # the judge

    def judge(self, flow_run_id: str, *, released: set[str], skipped: set[str],
              status: str) -> dict[str, dict[str, Any]]:
        """Each released node admitted exactly once (one Run under its key, the one its step
        names), no Run for a skipped node, every Run ended once with nothing left active,
        the flow run ended ``status`` by its nodes, and `ql flow show` agrees. The Runs by
        node."""
        runs = self.runs(flow_run_id)
        per_key: dict[str, int] = {}
        for run in runs:
            per_key[str(run["idempotency_key"])] = per_key.get(str(run["idempotency_key"]), 0) + 1
        assert per_key == {step_idempotency_key(flow_run_id, n): 1 for n in released}, per_key
        by_node = {n: found for n in released
                   if (found := self.run_of(flow_run_id, n)) is not None}
        steps = self.steps(flow_run_id)
        assert set(steps) == released | skipped, steps
        for node, step in steps.items():
            if node in skipped:
                assert (step["status"], step["run_id"]) == ("skipped", None), step
                continue
            run = by_node[node]
            assert step["run_id"] == run["id"], (step, run)
            assert (run["trigger_type"], run["triggered_by"], run["execution_origin"]) == (
                "flow", flow_run_id, "flow_step"), run
            assert run["status"] in ENDED, run
            assert step["status"] == ("succeeded" if run["status"] == "succeeded"
                                      else "failed"), (step, run)
            assert step["ended_at_ms"] is not None, step
            endings = [e["type"] for e in self.events(run["id"]) if e["type"] in ENDING_EVENTS]
            assert endings == [f"run.{run['status']}"], (node, endings)
            attempts = self.attempts(run["id"])
            assert not [a for a in attempts if a["status"] in ACTIVE_ATTEMPT], attempts
            assert len([a for a in attempts if a["status"] == "succeeded"]) <= 1, attempts
            # one process per Attempt that ran a command, and none beside them
            processes = self.processes(run["id"])
            assert sorted(p.attempt_id for p in processes) == sorted(
                a["id"] for a in attempts if a["started_at_ms"] is not None), (processes, attempts)
        flow = self.flow_run(flow_run_id)
        assert (flow["status"], flow["ended_reason"]) == (status, "nodes"), flow
        shown = self.show(flow_run_id)
        assert shown["status"] == status, shown
        assert {s["node"]: (s["state"], s["run"]) for s in shown["steps"]} == {
            n: (str(s["status"]), s["run_id"]) for n, s in steps.items()}, shown
        # and `ql audit` finds nothing, for the flows (F1-F4) nor for execution (E1-E5)
        report = self.bed.audit(int(flow["created_at_ms"]))
        assert report.flows is not None and report.flows.flow_runs >= 1, report.flows
        assert report.flows.violations == 0, report.flows.findings()
        assert report.execution is not None
        assert report.execution.violations == 0, report.execution.findings()
        return by_node


@pytest.fixture
def fbed(bed: FaultBed, tmp_path: Path) -> Iterator[FlowBed]:
    path = tmp_path / "gate"
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR)  # held open: no command blocks opening it
    harness = WorkerBed(bed=bed, ledger=bed.tmp / "commands.ledger")
    try:
        yield FlowBed(wbed=harness, gate=Gate(path, fd),
                      admin=Ql(bed.db.url("ql_admin"), cwd=tmp_path),
                      runtime=Ql(bed.db.url("ql_runtime"), cwd=tmp_path))
    finally:
        harness.close()
        os.close(fd)  # lets any command still waiting go (it reads end of file)


def created_by(fb: FlowBed, run_id: str) -> dict[str, Any]:
    """The run.created event of a Run: who admitted it."""
    [created] = [e for e in fb.events(run_id) if e["type"] == "run.created"]
    return created


# -- 1. a worker killed after a node's command finished ------------------------------------


# `make test` runs the killed worker; the retried and resumed ones wait on the same lease
# expiry and run with `make test-long` (the suite's 15-minute budget; the soak adds flows
# under chaos in both).
@pytest.mark.parametrize("mode", ["killed", pytest.param("retried", marks=pytest.mark.long),
                                  pytest.param("resumed", marks=pytest.mark.long)])
def test_a_worker_killed_after_a_node_finished_releases_the_next_nodes_once(
        fbed: FlowBed, mode: str) -> None:
    """Flow a -> b (on success), with h after a's failure; policy stop. a's command runs on
    worker a, which is frozen (SIGSTOP) before the command is let go: the command writes its
    end marker and exits 0 while its worker can record nothing; then the worker is SIGKILLed
    (killed, retried) or left frozen (resumed). Nothing is released until the lease has
    expired and the reconciler (in `ql control`) declares the Attempt lost, in the
    transaction that releases what follows:

    - killed (a not idempotent): its Run ends lost, node a failed, b skipped, h released (by
      the reconciler) and run on worker b; the flow run ends failed.
    - retried (a idempotent, 2 attempts): the lost Attempt is retried on worker b and
      succeeds; b is released (by worker b's finish) and runs, h is skipped; the flow run
      ends succeeded.
    - resumed (a not idempotent): as killed, but while h runs (it waits for the gate) worker
      a is let go (SIGCONT): its late finish of a is refused (attempt.late_callback_ignored)
      or dropped by its own fence, and changes nothing in the flow run: no step moves, no
      Run is admitted; then h ends and the flow run ends failed.

    Each released node has exactly one Run and a skipped one none, also a reconcile cycle
    after the flow run ended."""
    fb = fbed
    wbed = fb.wbed
    idempotent = mode == "retried"
    retry = RetryPolicy(max_attempts=2, backoff_ms=100, max_backoff_ms=100) if idempotent else None
    fb.task("ta", gated=True, idempotent=idempotent, retry=retry)
    fb.task("tb")
    fb.task("th", gated=mode == "resumed")
    fb.publish(KILL_FLOW)
    wbed.start_control().wait_ready()
    a = wbed.worker("a", slots=1)
    flow_run = fb.start("kill", "kill-1")
    run = wait_for(lambda: fb.running_on(flow_run, "a", "a"), "node a's command to run on a", 15)

    a.freeze()
    fb.gate.release(1)

    def finished() -> Process | None:
        [process] = fb.processes(run["id"])
        return process if process.end_ms is not None and not process.alive() else None

    done = wait_for(finished, "a's command to finish while its worker is frozen", 10)
    assert done.attempt == 1
    # the command has finished; nothing of it is recorded, nothing released
    [attempt] = fb.attempts(run["id"])
    assert attempt["status"] == "running"
    assert fb.run_of(flow_run, "a") == {**run, "status": "running"}
    assert {n: s["status"] for n, s in fb.steps(flow_run).items()} == {
        "a": "released", "b": "pending", "h": "pending"}
    if mode != "resumed":
        a.kill()
    frozen_at = wbed.bed.now()
    wbed.worker("b", slots=2)

    if mode == "resumed":
        handler = wait_for(lambda: fb.running_on(flow_run, "h", "b"), "a to be lost and h to run "
                           "on b", (WORKER_LEASE_MS + LOST_DUE_MS) / 1000 + 10)
        steps, runs, flow = fb.steps(flow_run), fb.runs(flow_run), fb.flow_run(flow_run)
        assert flow["status"] == "running"
        assert {n: s["status"] for n, s in steps.items()} == {
            "a": "failed", "b": "skipped", "h": "released"}
        a.signal(signal.SIGCONT)
        wait_for(lambda: [e for e in fb.events(run["id"])
                          if e["type"] == "attempt.late_callback_ignored"]
                 or "stopping its command" in a.log.read_text(),
                 "a to notice it was fenced out", 10)
        wait_for(lambda: worker_status(a)["running"] == 0, "a to let go of its lost attempt", 10)
        # its late finish moved nothing: the steps, the Runs and the flow run are as they were
        assert fb.steps(flow_run) == steps
        assert fb.runs(flow_run) == runs
        assert fb.flow_run(flow_run) == flow
        fb.gate.release(1)  # h ends now
        assert handler["id"] == fb.steps(flow_run)["h"]["run_id"]

    ended = wait_for(lambda: fb.ended(flow_run), "the flow run to end",
                     (WORKER_LEASE_MS + LOST_DUE_MS) / 1000 + 15)
    run = fb.run_of(flow_run, "a")
    assert run is not None
    attempts = fb.attempts(run["id"])
    lost = attempts[0]
    assert (lost["attempt"], lost["status"]) == (1, "lost"), attempts
    assert lost["worker_id"].startswith("a:")
    # lost by the reconciler once the lease and its grace were over, not before
    expiry = attempt["lease_expires_at_ms"]
    assert expiry + RECONCILE_GRACE_MS <= lost["finished_at_ms"] <= frozen_at + (
        WORKER_LEASE_MS + LOST_DUE_MS), (lost, expiry, frozen_at)
    [lost_event] = [e for e in fb.events(run["id"]) if e["type"] == "attempt.lost"]
    assert lost_event["actor_type"] == "reconciler", lost_event
    assert lost_event["payload"]["reason"] == "lease_expired", lost_event

    if not idempotent:
        released, skipped, status = {"a", "h"}, {"b"}, "failed"
        assert ended["status"] == "failed"
        assert (run["status"], run["attempts_spent"]) == ("lost", 1), run
        assert len(attempts) == 1
        by_node = fb.judge(flow_run, released=released, skipped=skipped, status=status)
        # h was released by the reconciler, in the transaction that ended a's Run
        handler = by_node["h"]
        assert created_by(fb, handler["id"])["actor_type"] == "reconciler"
        assert handler["created_at_ms"] == run["finished_at_ms"], (handler, run)
        assert fb.steps(flow_run)["a"]["ended_at_ms"] == run["finished_at_ms"]
        assert [x["worker_id"].split(":")[0] for x in fb.attempts(handler["id"])] == ["b"]
        assert handler["status"] == "succeeded"
    else:
        released, skipped, status = {"a", "b"}, {"h"}, "succeeded"
        assert ended["status"] == "succeeded"
        assert (run["status"], run["attempts_spent"]) == ("succeeded", 2), run
        assert [(x["attempt"], x["status"], x["worker_id"].split(":")[0]) for x in attempts] == [
            (1, "lost", "a"), (2, "succeeded", "b")], attempts
        by_node = fb.judge(flow_run, released=released, skipped=skipped, status=status)
        # b was released by worker b's finish of a's retry, in the same transaction
        follower = by_node["b"]
        assert created_by(fb, follower["id"])["actor_type"] == "worker"
        assert follower["created_at_ms"] == run["finished_at_ms"], (follower, run)
        assert follower["status"] == "succeeded"
    # a's first command ran to its end exactly once (and, idempotent, once more on retry)
    assert [(p.attempt, p.end_ms is not None) for p in fb.processes(run["id"])] == (
        [(1, True), (2, True)] if idempotent else [(1, True)])

    # nothing more is admitted for this flow run afterwards
    wait_db_time(wbed, int(ended["finished_at_ms"]) + RECONCILE_EVERY_MS + 500,
                 "a reconcile cycle past the flow run's ending")
    fb.judge(flow_run, released=released, skipped=skipped, status=status)


# -- 2. a lost COMMIT reply on the releasing transaction ------------------------------------


def test_a_lost_commit_reply_on_the_releasing_ending_is_resent_and_releases_once(
        fbed: FlowBed) -> None:
    """Flow a -> b. Worker a reaches PostgreSQL through the wire proxy. Once a's command runs
    (its start and running steps durable) and a lease renewal has just landed (no renewal
    nor heartbeat due for a while; the worker's one slot is full: no acquisition), DROP_COMMIT
    is armed for one reply and the command let go: the only COMMIT the worker sends then is
    its ending's, which also admits b's Run. The server commits it; the reply never arrives.
    The worker hears OutcomeUnknown for "record attempt steps", waits and resends its
    ending, which is accepted as already done: a has one Attempt, succeeded once; b was
    admitted exactly once, in the lost transaction (its Run stamped with a's ending, at least
    a retry pause before the worker reported a finished); b runs and the flow run succeeds.

    Should the dropped reply hit another transaction, the round proves nothing and another
    flow run is started, up to MAX_ROUNDS; every round's flow run is judged all the same."""
    fb = fbed
    wbed = fb.wbed
    fb.task("ta", gated=True)
    fb.task("tb")
    fb.publish(COMMIT_FLOW)
    wbed.start_control().wait_ready()
    flow_runs: list[str] = []
    proven: dict[str, Any] | None = None
    rounds: list[dict[str, Any]] = []
    with PgProxy(wbed.bed.db.server.host, wbed.bed.db.server.port) as proxy:
        url = proxy.route(wbed.bed.db.url("ql_worker"), sslmode="disable", gssencmode="disable")
        a = wbed.worker("a", slots=1, url=url)
        for round_no in range(1, MAX_ROUNDS + 1):
            flow_run = fb.start("commit", f"commit-{round_no}")
            flow_runs.append(flow_run)
            run = wait_for(lambda f=flow_run: fb.running_on(f, "a", "a"),  # type: ignore[misc]
                           f"round {round_no}: node a's command to run on worker a", 15)
            leased = leases_renewed_at(wbed, [run["id"]])[0]
            wait_for(lambda i=[run["id"]], after=leased: quiet(wbed, i, after),  # type: ignore[misc]
                     f"round {round_no}: a lease renewal, then no other write due for a while",
                     15, every=0.01)
            seen = len(outcome_unknown(a))
            dropped = proxy.fired["drop_commit"]
            proxy.arm(ProxyMode.DROP_COMMIT, count=1, application_name=WORKER_APP)
            fb.gate.release(1)  # a's command ends now
            wait_for(lambda n=dropped: proxy.fired["drop_commit"] > n,  # type: ignore[misc]
                     f"round {round_no}: the COMMIT reply dropped", 15)
            proxy.disarm()
            ended = wait_for(lambda f=flow_run: fb.ended(f),  # type: ignore[misc]
                             f"round {round_no}: the flow run to end", 30)
            assert ended["status"] == "succeeded", ended
            wait_for(lambda i=run["id"]: i in {e["run_id"] for e in a.events()  # type: ignore[misc]
                                               if e.get("event") == "finished"},
                     f"round {round_no}: the worker to report a's Run finished", 10)
            unknown = outcome_unknown(a)[seen:]
            steps = [e for e in unknown if str(e["message"]).startswith(f"{STEPS_ACTION}:")]
            rounds.append({"round": round_no, "unknown": [e["message"] for e in unknown]})
            if steps:
                proven = {"round": round_no, "flow_run": flow_run, "run": run, "steps": steps}
                break
        assert proven is not None, f"no dropped COMMIT reply hit a's ending: {rounds}"
        assert a.process is not None and a.process.poll() is None

    # the round whose ending's reply was lost: one job, one lost transaction, one resend
    assert len(proven["steps"]) == 1, proven["steps"]
    flow_run = proven["flow_run"]
    by_node = fb.judge(flow_run, released={"a", "b"}, skipped=set(), status="succeeded")
    first, follower = by_node["a"], by_node["b"]
    assert [(x["attempt"], x["status"], x["exit_code"]) for x in fb.attempts(first["id"])] == [
        (1, "succeeded", 0)]
    types = [e["type"] for e in fb.events(first["id"])]
    assert types.count("run.succeeded") == 1, types
    assert "attempt.late_callback_ignored" not in types, types
    assert len(types) == len(set(types)), types  # no lifecycle event written twice
    # b was admitted by the lost transaction itself, never by the resend: its Run carries
    # a's ending's stamp, which is at least a retry pause older than the worker's report
    finished = [e for e in a.events() if e.get("event") == "finished"
                and e["run_id"] == first["id"]]
    assert [e["status"] for e in finished] == ["succeeded"], finished
    assert int(finished[0]["at_ms"]) - first["finished_at_ms"] >= RESENT_BEFORE_MS, (
        finished, first)
    assert follower["created_at_ms"] == first["finished_at_ms"], (follower, first)
    assert created_by(fb, follower["id"])["actor_type"] == "worker"
    assert fb.steps(flow_run)["b"]["released_at_ms"] == first["finished_at_ms"]
    # and every round's flow run (those whose lost reply was another's) ran each node once
    for other in flow_runs:
        fb.judge(other, released={"a", "b"}, skipped=set(), status="succeeded")


# -- 3. a fan-in whose two Runs end at once on two workers ----------------------------------


def test_a_fan_in_ending_at_once_on_two_workers_releases_the_join_once(fbed: FlowBed) -> None:
    """Flow l, r -> join (join: all). l and r run on two workers (one slot each) and wait on
    the same FIFO; the test lets both go with one write, so their endings are written by two
    processes at the same moment. Both workers reach PostgreSQL through the wire proxy, which
    delays every reply by LINK_DELAY_S: each ending's transaction takes several round trips
    after the first statement stamps it, so two endings stamped less than OVERLAP_MS apart
    were in flight together. They meet at the flow run's lock and the second sees the
    first's outcome: the join is released exactly once, in the transaction of the ending that
    took the lock second, and runs; the flow run succeeds. FAN_IN_ROUNDS rounds."""
    fb = fbed
    wbed = fb.wbed
    fb.task("gated", gated=True)
    fb.task("tj")
    fb.publish(FAN_IN_FLOW)
    wbed.start_control().wait_ready()
    gaps: list[int] = []
    with PgProxy(wbed.bed.db.server.host, wbed.bed.db.server.port) as proxy:
        url = proxy.route(wbed.bed.db.url("ql_worker"), sslmode="disable", gssencmode="disable")
        wbed.worker("a", slots=1, url=url)
        wbed.worker("b", slots=1, url=url)
        for round_no in range(1, FAN_IN_ROUNDS + 1):
            flow_run = fb.start("fanin", f"fanin-{round_no}")

            def both_running(f: str = flow_run) -> list[dict[str, Any]] | None:
                on = [fb.running_on(f, n, w) for n in ("l", "r") for w in ("a", "b")]
                found = [run for run in on if run is not None]
                return found if len(found) == 2 else None

            roots = wait_for(both_running, f"round {round_no}: l and r to run on a and b", 20)
            workers = {fb.attempts(r["id"])[-1]["worker_id"].split(":")[0] for r in roots}
            assert workers == {"a", "b"}, workers
            proxy.set_delay(LINK_DELAY_S)  # (only while the endings are written)
            fb.gate.release(2)  # both commands end now
            wait_for(lambda f=flow_run: fb.nodes_ended(f, "l", "r"),  # type: ignore[misc]
                     f"round {round_no}: l and r to end", 20)
            proxy.set_delay(0)
            ended = wait_for(lambda f=flow_run: fb.ended(f),  # type: ignore[misc]
                             f"round {round_no}: the flow run to end", 30)
            assert ended["status"] == "succeeded", ended
            by_node = fb.judge(flow_run, released={"l", "r", "join"}, skipped=set(),
                               status="succeeded")
            left, right, join = by_node["l"], by_node["r"], by_node["join"]
            gaps.append(abs(left["finished_at_ms"] - right["finished_at_ms"]))
            # released in the transaction of one of the two endings: the one that took the
            # flow run's lock second (not always the one stamped second), by its worker
            releaser = fb.bed.rows("SELECT actor_type, actor_id FROM qinglong.run_events "
                                   "WHERE run_id = %s AND type = 'run.created'", [join["id"]])
            assert [r["actor_type"] for r in releaser] == ["worker"], releaser
            ending = [root for root in (left, right)
                      if fb.attempts(root["id"])[-1]["worker_id"] == releaser[0]["actor_id"]]
            assert len(ending) == 1, (releaser, left, right)
            # stamped no earlier than either ending (the releasing one may have read its time
            # before it waited for the other's lock): the later of the two
            assert join["created_at_ms"] == max(left["finished_at_ms"],
                                                right["finished_at_ms"]), (join, left, right)
    # in some round the two endings were in flight at once
    assert min(gaps) < OVERLAP_MS, gaps
