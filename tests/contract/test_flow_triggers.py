"""Triggers that give parameter values and triggers that start flows (issue 21, items 1 and
3) at the stores, on every database.

- A trigger's values are checked against its task when it is published and when a task
  publish re-pins it; its scheduled, fired and backfilled Runs run with them.
- A trigger of a flow admits each occurrence as one flow run (its roots' Runs released in the
  admitting transaction, the claim recorded as evidence), never as a Run of its task; the same
  occurrence never starts a second flow run; an occurrence whose flow cannot start is recorded
  as a flow run that failed with the reason, and the schedule moves on; a lost COMMIT reply is
  resolved from the flow run's key (PostgreSQL).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from qinglong.audit.flows import check_flows
from qinglong.audit.model import AuditParams
from qinglong.domain.admission import AdmissionIds
from qinglong.domain.decision import Disposition
from qinglong.domain.flow import parse_flow
from qinglong.domain.manual import ManualRequest
from qinglong.domain.parameters import Parameter, ParamType
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import Conflict, InvalidInput, NotFound, NotRunnable
from qinglong.profiles.audit_backend import run_audit
from qinglong.scheduler.coordinator import Coordinator
from qinglong.storage.admission.params import (
    ClaimCommitParams,
    CommitOutcome,
    CommitResult,
    ManualRunParams,
    ScheduleClaimParams,
)
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.runs.flow_store import FlowStore
from tests.contract.conftest import SCHEDULER_OWNER, Backend, PgBackend
from tests.contract.test_admission_batch import held_commits
from tests.contract.test_manual_runs import manual_store, wait_for

YEARLY = "0 0 1 1 *"
GREET = (Parameter(name="who", type=ParamType.STRING, default="world"),
         Parameter(name="count", type=ParamType.INTEGER, default=2))
DIAMOND = {"flow": "etl", "nodes": {
    "extract": "extract", "clean-a": {"task": "clean", "after": "extract"},
    "clean-b": {"task": "greet", "after": ["extract"]},
    "load": {"task": "load", "after": ["clean-a", "clean-b"]}}}


def task(backend: Backend, task_id: str, *params: Parameter, command: str = "true") -> int:
    return backend.definitions.task_publish(TaskPublishParams(
        project_id="demo", task_id=task_id, name=task_id,
        spec=CommandSpec(command=ShellCommand(command=command), parameters=params))
    ).revision.revision


@pytest.fixture
def demo(backend: Backend) -> Backend:
    backend.definitions.project_create(ProjectCreateParams(project_id="demo"))
    task(backend, "greet", *GREET)
    for name in ("extract", "clean", "load"):
        task(backend, name)
    FlowStore(backend.database("ql_admin", "contract-flow-trigger-admin"),
              manual_store(backend, "ql_admin"), actor_id="admin"
              ).flow_publish(parse_flow(DIAMOND), "demo")
    return backend


def publish(backend: Backend, trigger_id: str, **kw: Any) -> Any:
    kw.setdefault("expression", YEARLY)
    kw.setdefault("timezone", "UTC")
    return backend.definitions.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id=trigger_id, **kw)).revision


def stored_values(backend: Backend, run_id: str) -> Any:
    [row] = backend.sql("SELECT parameters FROM runs WHERE id = ?", run_id)
    value = row["parameters"]
    return json.loads(value) if isinstance(value, str) else value


def second_ago(backend: Backend) -> int:
    return backend.now_ms() // 1000 * 1000 - 1000


def admit_flow(backend: Backend, trigger_id: str, at_ms: int) -> list[CommitResult]:
    """Make ``trigger_id`` due at ``at_ms`` and run one scheduler cycle; what it committed."""
    backend.set_cursor("demo", trigger_id, at_ms)
    results: list[CommitResult] = []
    backend.run_cycle(lambda: str(uuid.uuid4()),
                      lambda _claim, _decision, result: results.append(result))
    return results


def flow_runs(backend: Backend) -> list[dict[str, Any]]:
    return [dict(r) for r in backend.sql(
        "SELECT id, status, trigger_id, trigger_revision, scheduled_for_ms, claim_version, "
        "claim_token, idempotency_key FROM flow_runs ORDER BY created_at_ms, id")]


def steps(backend: Backend, flow_run_id: str) -> dict[str, tuple[str, Any]]:
    return {str(r["node_id"]): (str(r["status"]), r["error_summary"]) for r in backend.sql(
        "SELECT node_id, status, error_summary FROM flow_steps WHERE flow_run_id = ?",
        flow_run_id)}


# --- values a trigger gives -----------------------------------------------------------


def test_a_triggers_values_are_typed_by_its_task_and_its_runs_run_with_them(
        demo: Backend) -> None:
    revision = publish(demo, "nightly", task_id="greet", parameters={"count": "5"})
    assert revision.spec.values == {"count": 5}  # typed as the task declares it
    run_id = demo.admit("demo", "nightly", second_ago(demo))
    assert stored_values(demo, run_id) == {"count": 5, "who": "world"}
    # fired by hand through the trigger: the trigger's values, the request's over them
    fired = manual_store(demo).run_admit_manual(ManualRunParams(request=ManualRequest(
        project_id="demo", trigger_id="nightly", request_id="f-1", actor="alice",
        parameters={"who": "bob"})))
    assert stored_values(demo, fired.run_id) == {"count": 5, "who": "bob"}
    # the same values again write nothing; none clears them
    assert publish(demo, "nightly", parameters={"count": 5}).revision == revision.revision
    assert publish(demo, "nightly", parameters={}).spec.values == {}


@pytest.mark.parametrize(("values", "field"), [
    ({"nobody": "x"}, "parameters"),
    ({"count": "many"}, "parameters.count"),
    ({"QL_X": "1"}, "parameters"),
])
def test_a_value_the_task_does_not_take_is_refused_at_publish(
        demo: Backend, values: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        publish(demo, "nightly", task_id="greet", parameters=values)
    assert refused.value.field == field
    assert demo.sql("SELECT count(*) AS n FROM trigger_revisions")[0]["n"] == 0


def test_a_task_publish_that_would_break_a_triggers_values_is_refused_unless_not_repinning(
        demo: Backend) -> None:
    publish(demo, "nightly", task_id="greet", parameters={"count": 5})
    before = demo.sql("SELECT count(*) AS n FROM task_definition_revisions")[0]["n"]
    with pytest.raises(InvalidInput) as refused:  # count is no longer declared
        task(demo, "greet", GREET[0])
    assert refused.value.field == "trigger nightly: parameters"
    assert "--no-repin" in refused.value.rule
    assert demo.sql("SELECT count(*) AS n FROM task_definition_revisions")[0]["n"] == before
    demo.definitions.task_publish(TaskPublishParams(
        project_id="demo", task_id="greet", name="greet", repin_triggers=False,
        spec=CommandSpec(command=ShellCommand(command="true"), parameters=GREET[:1])))
    with pytest.raises(NotRunnable):  # its pinned revision moved on: fire refuses, as before
        manual_store(demo).run_admit_manual(ManualRunParams(request=ManualRequest(
            project_id="demo", trigger_id="nightly", request_id="f-2", actor="alice")))


# --- triggers that start flows ----------------------------------------------------------


def test_an_occurrence_of_a_flow_trigger_starts_one_flow_run_and_no_run_of_its_task(
        demo: Backend) -> None:
    revision = publish(demo, "etl-nightly", flow="etl", parameters={"who": "eve"})
    assert (revision.task_id, revision.spec.flow) == ("extract", "etl")  # the first root's task
    at = second_ago(demo)
    results = admit_flow(demo, "etl-nightly", at)
    [admitted] = [r for r in results if r.outcome is CommitOutcome.ADMITTED]
    assert admitted.run_id is None and admitted.flow_run_id is not None
    [flow] = flow_runs(demo)
    assert flow["id"] == admitted.flow_run_id and flow["status"] == "running"
    assert (flow["trigger_id"], flow["trigger_revision"], flow["scheduled_for_ms"]) == (
        "etl-nightly", 1, at)
    assert flow["claim_version"] is not None and flow["claim_token"]
    assert steps(demo, flow["id"])["extract"][0] == "released"
    runs = demo.sql("SELECT trigger_type, triggered_by FROM runs")
    assert [(r["trigger_type"], r["triggered_by"]) for r in runs] == [("flow", flow["id"])]
    assert demo.sql("SELECT parameters FROM flow_runs")[0]["parameters"] is not None
    # the same occurrence decided again starts nothing more (its key is unique)
    with pytest.raises(Conflict):
        admit_flow(demo, "etl-nightly", at)
    assert len(flow_runs(demo)) == 1 and len(demo.sql("SELECT id FROM runs")) == 1
    report = check_flows_now(demo)
    assert report.violations == 0, report.findings()


def check_flows_now(backend: Backend) -> Any:
    kernel = backend.database("ql_runtime", "contract-flow-trigger-audit")
    return kernel.read("audit flows", lambda tx: check_flows(tx, from_ms=0,
                                                             to_ms=backend.now_ms() + 1))


def test_the_audit_counts_the_flow_run_an_occurrence_started_as_its_admission(
        demo: Backend) -> None:
    revision = publish(demo, "tick", flow="etl", expression="* * * * * *")
    first = (revision.created_at_ms // 1000 + 1) * 1000  # its first occurrence
    for at in (first, first + 1000):
        left = at - demo.now_ms()
        if left > 0:
            demo.pass_time(left)
        demo.set_cursor("demo", "tick", at)
        results: list[CommitResult] = []
        Coordinator(demo.schedules, owner=SCHEDULER_OWNER, budget=1, wake_hint=False,
                    on_committed=lambda _c, _d, result, got=results: got.append(result)
                    ).run_cycle()
        assert [r.outcome for r in results] == [CommitOutcome.ADMITTED]
    params = AuditParams(start_ms=first, end_ms=first + 1000, settle_ms=0,
                         project_id="demo", trigger_id="tick")
    report = run_audit(demo.url("ql_runtime"), demo.clock(), params)
    [tick] = report.triggers
    assert report.ok, (report.triggers, report.notes)
    assert (tick.expected, tick.admitted, tick.duplicates, tick.spurious, tick.fenced_out,
            tick.bad_shape) == (2, 2, 0, [], [], [])
    # a flow run written without its steps is a bad shape
    [first_run] = demo.sql("SELECT id FROM flow_runs WHERE scheduled_for_ms = ?", first)
    demo.sql("DELETE FROM flow_steps WHERE flow_run_id = ?", first_run["id"])
    [tick] = run_audit(demo.url("ql_runtime"), demo.clock(), params).triggers
    assert tick.bad_shape == [first_run["id"]]


def test_a_flow_trigger_is_checked_against_its_flow_at_publish(demo: Backend) -> None:
    with pytest.raises(NotFound):
        publish(demo, "t1", flow="nope")
    with pytest.raises(InvalidInput) as refused:
        publish(demo, "t1", flow="etl", task_id="greet-not")
    assert refused.value.field == "task"
    with pytest.raises(InvalidInput) as refused:  # no task of the flow declares it
        publish(demo, "t1", flow="etl", parameters={"nobody": 1})
    assert refused.value.field == "parameters.nobody"
    with pytest.raises(InvalidInput):  # greet (node clean-b) takes an integer
        publish(demo, "t1", flow="etl", parameters={"count": "x"})
    assert demo.sql("SELECT count(*) AS n FROM trigger_revisions")[0]["n"] == 0
    publish(demo, "t1", flow="etl", task_id="load")  # any task of the flow may file it
    with pytest.raises(Conflict):  # what a trigger starts never changes
        publish(demo, "t1", flow="other")
    publish(demo, "t2", task_id="greet")
    with pytest.raises(Conflict):
        publish(demo, "t2", flow="etl")


def test_a_flow_trigger_is_not_fired_or_backfilled_as_a_run_of_its_task(demo: Backend) -> None:
    publish(demo, "etl-nightly", flow="etl")
    with pytest.raises(NotRunnable) as refused:
        manual_store(demo).run_admit_manual(ManualRunParams(request=ManualRequest(
            project_id="demo", trigger_id="etl-nightly", request_id="f-1", actor="alice")))
    assert "ql flow run --flow etl" in refused.value.message
    assert demo.sql("SELECT count(*) AS n FROM runs")[0]["n"] == 0


def test_an_occurrence_whose_flow_cannot_start_is_a_failed_flow_run_and_the_schedule_moves_on(
        demo: Backend) -> None:
    publish(demo, "etl-nightly", flow="etl")
    task(demo, "load", command="false")  # the flow still pins the old revision of load
    at = second_ago(demo)
    results = admit_flow(demo, "etl-nightly", at)
    assert [r.outcome for r in results] == [CommitOutcome.ADMITTED]
    [flow] = flow_runs(demo)
    assert flow["status"] == "failed" and flow["scheduled_for_ms"] == at
    found = steps(demo, flow["id"])
    assert {state for state, _ in found.values()} == {"skipped"}
    assert all("publish the flow again" in str(error) for _, error in found.values())
    assert demo.sql("SELECT count(*) AS n FROM runs")[0]["n"] == 0
    [row] = demo.sql("SELECT next_fire_at_ms FROM trigger_schedules "
                     "WHERE trigger_id = 'etl-nightly'")
    assert int(row["next_fire_at_ms"]) > at


def test_a_lost_commit_reply_on_a_flow_occurrence_is_resolved_from_its_key(
        pg_backend: PgBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = pg_backend
    backend.definitions.project_create(ProjectCreateParams(project_id="demo"))
    for name in ("greet", "extract", "clean", "load"):
        task(backend, name)
    FlowStore(backend.database("ql_admin", "contract-flow-trigger-admin"),
              manual_store(backend, "ql_admin"), actor_id="admin"
              ).flow_publish(parse_flow(DIAMOND), "demo")
    publish(backend, "etl-nightly", flow="etl")
    backend.set_cursor("demo", "etl-nightly", second_ago(backend))
    store = backend.schedule_store("r1", commit_deadline_s=0.4)
    [claim] = store.schedule_claim(ScheduleClaimParams(owner="r1", lease_ms=30_000, limit=1))
    decision = claim.decide(grace_ms=30_000)  # type: ignore[union-attr]
    assert decision.disposition is Disposition.ADMIT
    params = ClaimCommitParams(claim=claim, decision=decision,  # type: ignore[arg-type]
                               ids=AdmissionIds.new(lambda: str(uuid.uuid4())))
    with held_commits(backend_bed(backend)) as held:
        def commit_lands(_settle_s: float) -> None:
            held.release()
            wait_for(lambda: len(flow_runs(backend)) == 1)

        monkeypatch.setattr("qinglong.storage.admission.batch.pause", commit_lands)
        [outcome] = store.schedule_commit_batch([params])
    assert isinstance(outcome, CommitResult), outcome
    assert outcome.in_doubt and outcome.outcome is CommitOutcome.ADMITTED
    [flow] = flow_runs(backend)
    assert outcome.flow_run_id == flow["id"] == params.ids.run_id  # type: ignore[union-attr]
    assert len(backend.sql("SELECT id FROM runs")) == 1  # the root, once


def backend_bed(backend: PgBackend) -> Any:
    from tests.contract.test_admission_batch import SharedBed
    return SharedBed(backend)



def test_a_flow_publish_that_would_break_a_flow_triggers_values_is_refused(
        demo: Backend) -> None:
    publish(demo, "etl-nightly", flow="etl", parameters={"count": 3})
    task(demo, "greet", GREET[0], Parameter(name="count", type=ParamType.BOOLEAN,
                                            default=False))
    admin = FlowStore(demo.database("ql_admin", "contract-flow-trigger-admin"),
                      manual_store(demo, "ql_admin"), actor_id="admin")
    with pytest.raises(InvalidInput) as refused:  # count is now a boolean; the trigger gives 3
        admin.flow_publish(parse_flow(DIAMOND), "demo")
    assert refused.value.field == "trigger etl-nightly: parameters (node clean-b)"
    assert admin.flow_get("demo", "etl").revision == 1  # nothing written
    publish(demo, "etl-nightly", parameters={"count": "true"})
    assert admin.flow_publish(parse_flow(DIAMOND), "demo").revision.revision == 2
