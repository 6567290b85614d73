"""RequestAdmissions contract (run now: `ql task run`, `ql trigger fire`) on every database.

A manual Run is admitted through the same rows as a scheduled one (queued Run, claimed first
Attempt, run.created + run.queued), keyed by the client request id: a request sent again
returns its Run, a request id reused for another target is refused, and every refusal
writes nothing. Fired through a trigger, the Run carries the trigger's overlap policy, which
applies at dispatch like to any Run; the task's concurrency limit applies to both kinds.
Both the execution audit (E1-E5) and the admission audit stay clean with manual Runs present.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from qinglong.audit.model import AuditParams
from qinglong.domain.admission import AdmissionIds
from qinglong.domain.manual import ManualRequest
from qinglong.domain.runs import manual_idempotency_key
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.domain.trigger import Overlap, OverlapPolicy
from qinglong.errors import (
    InvalidInput,
    NotFound,
    NotRunnable,
    OutcomeUnknown,
    PermissionDenied,
    QinglongError,
    RequestIdConflict,
)
from qinglong.profiles.audit_backend import run_audit
from qinglong.storage.admission import RequestAdmissions
from qinglong.storage.admission.params import ManualRunParams, ManualRunResult
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from tests.contract.conftest import Backend, PgBackend
from tests.contract.test_execution_audit import audit as execution_audit
from tests.contract.test_leases import acquire
from tests.contract.test_retries_and_overlap import SUCCEEDED, finish
from tests.support.held_commits import HeldCommits

YEARLY = "0 0 1 1 *"


@dataclass
class Manual:
    backend: Backend
    store: RequestAdmissions

    def run(self, request_id: str, *, task: str | None = None, trigger: str | None = None,
            project: str = "demo", actor: str = "alice") -> ManualRunResult:
        return self.store.run_admit_manual(ManualRunParams(request=ManualRequest(
            project_id=project, task_id=task, trigger_id=trigger, request_id=request_id,
            actor=actor)))

    def raw_run(self, run_id: str) -> dict[str, object]:
        """The stored Run row as written (columns the read model leaves out too)."""
        columns = ("trigger_type, execution_origin, triggered_by, idempotency_key, trigger_id, "
                   "trigger_revision, scheduled_for_ms, created_at_ms, queued_at_ms, "
                   "overlap_policy, overlap_key, overlap_queue_limit")
        [row] = self.backend.sql(f"SELECT {columns} FROM runs WHERE id = ?", run_id)
        return row

    def counts(self) -> tuple[int, int, int]:
        """Runs, Attempts and events stored (a refusal changes none of them)."""
        [row] = self.backend.sql(
            "SELECT (SELECT count(*) FROM runs) AS r, (SELECT count(*) FROM run_attempts)"
            " AS a, (SELECT count(*) FROM run_events) AS e")
        return int(row["r"]), int(row["a"]), int(row["e"])


def manual_store(backend: Backend, role: str = "ql_runtime", **options: float) -> RequestAdmissions:
    """The run-now store as ``role`` (a connection of its own on PostgreSQL, closed with the
    backend); ``options`` go to the store (its deadlines)."""
    return RequestAdmissions(backend.database(role, "contract-manual"), **options)


@pytest.fixture
def manual(backend: Backend) -> Iterator[Manual]:
    d = backend.definitions
    for project in ("demo", "other"):
        d.project_create(ProjectCreateParams(project_id=project))
        d.task_publish(TaskPublishParams(project_id=project, task_id="hello", name="Hello",
                                         spec=CommandSpec(command=ShellCommand(command="true"))))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="bye", name="Bye",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    d.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="t1", task_id="hello", expression=YEARLY, timezone="UTC",
        overlap=Overlap(policy=OverlapPolicy.QUEUE, queue_limit=2)))
    d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="plain",
                                           task_id="hello", expression=YEARLY, timezone="UTC"))
    yield Manual(backend, manual_store(backend))


# --- admission -------------------------------------------------------------------------------


def test_task_run_admits_one_queued_run_with_the_admission_shape(manual: Manual) -> None:
    before = manual.backend.now_ms()
    result = manual.run("req-1", task="hello")
    after = manual.backend.now_ms()
    assert result.admitted and not result.in_doubt
    detail = manual.backend.runs.run_get(result.run_id)
    run = detail.run
    assert (run.status, run.trigger_type, run.execution_origin, run.triggered_by) == (
        "queued", "manual", "manual_user", "alice")
    assert (run.project_id, run.task_id, run.trigger_id, run.trigger_revision) == (
        "demo", "hello", None, None)
    assert run.idempotency_key == "ql3:manual:v1:req-1" == manual_idempotency_key("req-1")
    assert run.scheduled_for_ms == run.created_at_ms == run.queued_at_ms
    assert run.scheduled_for_ms is not None and before <= run.scheduled_for_ms <= after
    assert run.task_revision.startswith("qltd:v1:1:")
    [attempt] = detail.attempts
    assert (attempt.attempt, attempt.status, attempt.executor_type) == (
        1, "claimed", manual.backend.executor_type)
    assert [(e.sequence, e.type, e.actor_type, e.actor_id) for e in detail.events] == [
        (1, "run.created", "user", "alice"), (2, "run.queued", "user", "alice")]
    created = detail.events[0].payload
    assert (created["request_id"], created["requested_by"], created["origin"],
            created["task_revision"]) == ("req-1", "alice", "manual_user", 1)
    raw = manual.raw_run(result.run_id)
    assert (raw["overlap_policy"], raw["overlap_key"], raw["overlap_queue_limit"]) == (
        None, None, None)
    assert manual.counts() == (1, 1, 2)


def test_a_request_sent_again_returns_its_run_and_writes_nothing(manual: Manual) -> None:
    first = manual.run("again", task="hello")
    counts = manual.counts()
    manual.backend.let_time_pass()
    second = manual.run("again", task="hello", actor="bob")  # a retry by anyone
    assert (second.run_id, second.admitted) == (first.run_id, False)
    assert manual.counts() == counts
    assert manual.backend.runs.run_get(first.run_id).run.triggered_by == "alice"
    fired = manual.run("fired", trigger="t1")
    assert manual.run("fired", trigger="t1") == ManualRunResult(run_id=fired.run_id,
                                                                admitted=False)
    # what happened since does not matter to a retry: it is answered from the key
    manual.backend.definitions.project_archive("demo")
    assert manual.run("again", task="hello") == ManualRunResult(run_id=first.run_id,
                                                                admitted=False)


def test_a_request_id_reused_for_another_target_is_refused(manual: Manual) -> None:
    manual.run("shared", task="hello")
    manual.run("fired", trigger="t1")
    counts = manual.counts()
    for kwargs in ({"task": "bye"}, {"trigger": "t1"}, {"trigger": "plain"}):
        with pytest.raises(RequestIdConflict) as refused:
            manual.run("shared", **kwargs)  # type: ignore[arg-type]
        assert refused.value.code == "QL_REQUEST_ID_CONFLICT"
        assert "shared" in refused.value.message
    # a trigger's task run directly is another target than the trigger itself
    with pytest.raises(RequestIdConflict):
        manual.run("fired", task="hello")
    with pytest.raises(RequestIdConflict):
        manual.run("fired", trigger="plain")
    assert manual.counts() == counts


def test_request_ids_are_scoped_to_their_project(manual: Manual) -> None:
    demo = manual.run("same", task="hello")
    other = manual.run("same", task="hello", project="other")
    assert demo.admitted and other.admitted and demo.run_id != other.run_id


# --- refusals: nothing written ----------------------------------------------------------------


def _refused(manual: Manual, error: type[QinglongError], request_id: str, **kwargs: str) -> str:
    counts = manual.counts()
    with pytest.raises(error) as refused:
        manual.run(request_id, **kwargs)  # type: ignore[arg-type]
    assert manual.counts() == counts
    return refused.value.message


def test_unknown_project_task_and_trigger_are_not_found(manual: Manual) -> None:
    assert "'nope'" in _refused(manual, NotFound, "r1", task="hello", project="nope")
    assert "'nope'" in _refused(manual, NotFound, "r2", task="nope")
    assert "'nope'" in _refused(manual, NotFound, "r3", trigger="nope")
    assert manual.counts() == (0, 0, 0)


def test_disabled_task_and_trigger_are_not_runnable(manual: Manual) -> None:
    d = manual.backend.definitions
    d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="plain", enabled=False))
    assert "disabled" in _refused(manual, NotRunnable, "r1", trigger="plain")
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="Hello",
                                     spec=CommandSpec(command=ShellCommand(command="true")),
                                     enabled=False, expected_revision=1))
    assert "disabled" in _refused(manual, NotRunnable, "r2", task="hello")
    assert "disabled" in _refused(manual, NotRunnable, "r3", trigger="t1")  # its task is
    assert manual.run("r4", task="bye").admitted  # the rest of the project runs


def test_an_archived_project_runs_nothing_until_unarchived(manual: Manual) -> None:
    manual.backend.definitions.project_archive("demo")
    assert "archived" in _refused(manual, NotRunnable, "r1", task="hello")
    assert "archived" in _refused(manual, NotRunnable, "r2", trigger="t1")
    manual.backend.definitions.project_unarchive("demo")
    assert manual.run("r1", task="hello").admitted


def test_deleted_task_and_trigger_and_a_stale_pin(manual: Manual) -> None:
    d = manual.backend.definitions
    d.trigger_delete("demo", "plain")
    _refused(manual, NotFound, "r1", trigger="plain")
    d.task_delete("other", "hello")
    _refused(manual, NotFound, "r2", task="hello", project="other")
    # a new task revision that t1 was not re-pinned to: t1 does not fire, on schedule or now
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="Hello",
                                     spec=CommandSpec(command=ShellCommand(command="echo 2")),
                                     repin_triggers=False, expected_revision=1))
    assert "pins revision 1" in _refused(manual, NotRunnable, "r3", trigger="t1")
    assert manual.run("r4", task="hello").admitted  # the task itself runs its new revision


def test_a_request_is_checked_before_any_database_work() -> None:
    with pytest.raises(InvalidInput):
        ManualRequest(project_id="demo", task_id="a", trigger_id="b", request_id="r", actor="x")
    with pytest.raises(InvalidInput):
        ManualRequest(project_id="demo", request_id="r", actor="x")
    with pytest.raises(InvalidInput):
        ManualRequest(project_id="demo", task_id="a", request_id="no spaces", actor="x")
    with pytest.raises(InvalidInput):
        ManualRequest(project_id="demo", task_id="a", request_id="r" * 129, actor="x")
    with pytest.raises(InvalidInput):
        ManualRequest(project_id="demo", task_id="a", request_id="r", actor="tab\there")
    with pytest.raises(InvalidInput):
        ManualRequest(project_id="demo", task_id="a", request_id="r", actor="")


# --- at dispatch: overlap and limits ----------------------------------------------------------


def test_trigger_fire_carries_the_trigger_and_its_overlap_columns(manual: Manual) -> None:
    result = manual.run("fire-1", trigger="t1")
    raw = manual.raw_run(result.run_id)
    assert (raw["trigger_type"], raw["trigger_id"], raw["trigger_revision"]) == ("manual", "t1", 1)
    assert (raw["overlap_policy"], raw["overlap_key"], raw["overlap_queue_limit"]) == (
        "queue", "t1", 2)
    plain = manual.raw_run(manual.run("fire-2", trigger="plain").run_id)
    assert (plain["overlap_policy"], plain["overlap_key"]) == (None, None)  # allow
    created = manual.backend.runs.run_get(result.run_id).events[0].payload
    assert created["trigger_revision"] == 1 and len(str(created["trigger_content_digest"])) == 64


def test_the_overlap_policy_applies_to_a_fired_run_at_dispatch(backend: Backend) -> None:
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="job", name="job",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    d.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="t1", task_id="job", expression=YEARLY, timezone="UTC",
        overlap=Overlap(policy=OverlapPolicy.SKIP)))
    store = manual_store(backend)
    scheduled = backend.admit("demo", "t1", backend.now_ms() // 1000 * 1000 - 1000)
    [lease] = acquire(backend, limit=1)
    assert lease.fence.run_id == scheduled
    fired = store.run_admit_manual(ManualRunParams(request=ManualRequest(
        project_id="demo", trigger_id="t1", request_id="f", actor="alice")))
    alone = store.run_admit_manual(ManualRunParams(request=ManualRequest(
        project_id="demo", task_id="job", request_id="t", actor="alice")))
    [next_lease] = acquire(backend)  # the task's own Run is no Run of the trigger
    assert next_lease.fence.run_id == alone.run_id
    skipped = backend.runs.run_get(fired.run_id)
    assert (skipped.run.status, skipped.run.cancel_reason) == ("cancelled", "policy")
    assert skipped.events[-1].payload["previous_run"] == scheduled
    finish(backend, lease, SUCCEEDED)


def test_the_task_concurrency_limit_applies_to_manual_runs(backend: Backend) -> None:
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="job", name="job", spec=CommandSpec(
        command=ShellCommand(command="true"), concurrency=1)))
    store = manual_store(backend)
    admitted = []
    for n in (1, 2):
        admitted.append(store.run_admit_manual(ManualRunParams(request=ManualRequest(
            project_id="demo", task_id="job", request_id=f"r{n}", actor="alice"))))
        backend.let_time_pass()  # queued one after the other
    first, second = admitted
    [lease] = acquire(backend, limit=2)
    assert lease.fence.run_id == first.run_id
    assert acquire(backend) == []
    assert backend.runs.run_get(second.run_id).run.status == "queued"  # waits its turn
    finish(backend, lease, SUCCEEDED)
    [turn] = acquire(backend)
    assert turn.fence.run_id == second.run_id


# --- the audits ---------------------------------------------------------------------------------


def test_both_audits_stay_clean_with_manual_runs_present(manual: Manual) -> None:
    backend = manual.backend
    # Once a minute, at a second just ahead: the scheduler admits that one occurrence however
    # late its cycle comes (a per-second trigger would have it admit the next ones as well).
    at_second = (backend.now_ms() // 1000 + 2) % 60
    published = backend.definitions.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="minutely", task_id="bye",
        expression=f"{at_second} * * * * *", timezone="UTC"))
    # the trigger's first occurrence: the first whole second at that second after the publish
    first = (published.revision.created_at_ms // 1000 + 1) * 1000
    while first // 1000 % 60 != at_second:
        first += 1000
    while backend.now_ms() < first:
        backend.let_time_pass()
    scheduled = backend.admit("demo", "minutely", first)
    # Fired in the occurrence's second (on a fake clock that did not move: at the very same
    # instant, so counted as an occurrence it would be a duplicate; on a clock that moved on,
    # a little later, so counted it would be off the spec): it is neither.
    fired = manual.run("f1", trigger="minutely")
    alone = manual.run("t1", task="bye")
    fired_at = manual.backend.runs.run_get(fired.run_id).run.scheduled_for_ms
    assert fired_at is not None
    assert first <= fired_at <= backend.now_ms()
    if not backend.capabilities.database_clock:  # the node's clock: the test's fake clock
        assert fired_at == first
    leases = {lease.fence.run_id: lease for lease in acquire(backend, limit=3)}
    assert set(leases) == {scheduled, fired.run_id, alone.run_id}
    finish(backend, leases[fired.run_id], SUCCEEDED)
    finish(backend, leases[alone.run_id])  # failed: an ended Run all the same
    report = execution_audit(backend)
    assert report.violations == 0, report.findings()
    assert (report.runs, report.ended, report.in_progress) == (3, 2, 1)
    # a window holding the one occurrence (and the fired Run, unless this machine was slow)
    end = max(first + 1, min(fired_at, first + 999))
    audited = run_audit(backend.url("ql_runtime"), backend.clock(),
                        AuditParams(start_ms=first, end_ms=end, settle_ms=0, project_id="demo",
                                    trigger_id="minutely"))
    assert audited.ok, (audited.triggers, audited.execution)
    [minutely] = audited.triggers
    assert (minutely.expected, minutely.admitted, minutely.duplicates, minutely.spurious) == (
        1, 1, 0, [])


# --- PostgreSQL: the role, and twins racing -----------------------------------------------------


def test_run_now_needs_ql_runtime_and_ql_admin_is_refused(pg_backend: PgBackend) -> None:
    pg_backend.definitions.project_create(ProjectCreateParams(project_id="demo"))
    pg_backend.definitions.task_publish(TaskPublishParams(
        project_id="demo", task_id="hello", name="Hello",
        spec=CommandSpec(command=ShellCommand(command="true"))))
    store = manual_store(pg_backend, "ql_admin")
    with pytest.raises(PermissionDenied) as refused:
        store.run_admit_manual(ManualRunParams(request=ManualRequest(
            project_id="demo", task_id="hello", request_id="r", actor="alice")))
    assert "ql_admin" in refused.value.message
    assert pg_backend.db.execute("SELECT count(*) AS n FROM runs") == [{"n": 0}]


def test_twin_requests_racing_admit_one_run(pg_backend: PgBackend) -> None:
    pg_backend.definitions.project_create(ProjectCreateParams(project_id="demo"))
    pg_backend.definitions.task_publish(TaskPublishParams(
        project_id="demo", task_id="hello", name="Hello",
        spec=CommandSpec(command=ShellCommand(command="true"))))
    twins = 4
    barrier = threading.Barrier(twins)
    results: list[ManualRunResult] = []
    errors: list[BaseException] = []

    databases = [pg_backend.database("ql_runtime", f"contract-twin-{n}") for n in range(twins)]

    def send(n: int) -> None:
        store = RequestAdmissions(databases[n])
        try:
            databases[n].now_ms()  # connected before the race starts
            barrier.wait(10)
            results.append(store.run_admit_manual(ManualRunParams(
                request=ManualRequest(project_id="demo", task_id="hello", request_id="twin",
                                      actor=f"client-{n}"),
                ids=AdmissionIds(run_id=f"00000000-0000-4000-8000-00000000000{n}",
                                 attempt_id=f"00000000-0000-4000-8000-00000000001{n}",
                                 created_event_id=f"00000000-0000-4000-8000-00000000002{n}",
                                 queued_event_id=f"00000000-0000-4000-8000-00000000003{n}"))))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(n,)) for n in range(twins)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert len({r.run_id for r in results}) == 1 and len(results) == twins
    assert sum(r.admitted for r in results) == 1
    assert pg_backend.database("ql_runtime", "contract-count").read(
        "count", lambda tx: tx.sql("SELECT count(*) AS n FROM qinglong.runs").fetchall()) == [
        {"n": 1}]


def wait_for(predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Wait for something another session does (a held commit landing, say)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def count_runs(backend: PgBackend) -> int:
    [row] = backend.db.execute("SELECT count(*) AS n FROM runs")
    return int(row["n"])  # type: ignore[call-overload]


def _one_task(backend: PgBackend) -> None:
    backend.definitions.project_create(ProjectCreateParams(project_id="demo"))
    backend.definitions.task_publish(TaskPublishParams(
        project_id="demo", task_id="hello", name="Hello",
        spec=CommandSpec(command=ShellCommand(command="true"))))


def test_a_lost_commit_reply_that_landed_is_found_by_the_key(
        pg_backend: PgBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    _one_task(pg_backend)
    with HeldCommits(pg_backend.db) as held:
        def commit_lands(_settle_s: float) -> None:
            """Where the store waits between the lost reply and its lookup: the commit lands."""
            held.release()
            wait_for(lambda: count_runs(pg_backend) == 1)

        monkeypatch.setattr("qinglong.storage.admission.on_request.pause", commit_lands)
        store = manual_store(pg_backend, commit_deadline_s=0.3)
        request = ManualRequest(project_id="demo", task_id="hello", request_id="lost-reply",
                                actor="alice")
        result = store.run_admit_manual(ManualRunParams(request=request))
        assert result.admitted and result.in_doubt
        assert store.run_admit_manual(ManualRunParams(request=request)) == ManualRunResult(
            run_id=result.run_id, admitted=False)
    assert count_runs(pg_backend) == 1


def test_a_lost_commit_reply_not_yet_visible_says_to_retry_with_the_id(
        pg_backend: PgBackend) -> None:
    _one_task(pg_backend)
    with HeldCommits(pg_backend.db) as held:
        store = manual_store(pg_backend, commit_deadline_s=0.3, in_doubt_settle_s=0.1)
        request = ManualRequest(project_id="demo", task_id="hello", request_id="unknown-1",
                                actor="alice")
        with pytest.raises(OutcomeUnknown) as unknown:  # the lookup came before the commit
            store.run_admit_manual(ManualRunParams(request=request))
        assert "--request-id unknown-1" in unknown.value.message
        assert count_runs(pg_backend) == 0
        held.release()  # the commit lands after all
        wait_for(lambda: count_runs(pg_backend) == 1)
        again = store.run_admit_manual(ManualRunParams(request=request))  # the advised retry
        assert not again.admitted
    assert count_runs(pg_backend) == 1
