"""RunStore contract: listing with filters and bounds, reading by id or prefix, Run shape.

Runs are admitted by the one scheduling algorithm (the Coordinator over the ScheduleStore:
claim, decide, commit) under the store's clock: SQLite's fake clock, PostgreSQL's database
clock. Triggers fire yearly, so nothing is due unless a case puts a trigger's cursor at a
chosen instant (within the grace) and runs one cycle.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from qinglong.domain.model import Run
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import InvalidInput, NotFound
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.runs.params import RunListParams
from tests.contract.conftest import SCHEDULER_OWNER, Backend

YEARLY = "0 0 1 1 *"

# Run ids chosen so that prefixes and ties are controlled (all are version-4 UUIDs):
# R1 and R2 share the 8-character prefix "0a1b2c3d"; R2 and R3 share a scheduled time.
R1 = "0a1b2c3d-0000-4000-8000-000000000001"
R2 = "0a1b2c3d-1111-4000-8000-000000000002"
R3 = "05000000-0000-4000-8000-000000000003"
R4 = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
R5 = "d3b07384-d9a0-4c9b-8f0e-3a1b2c4d5e6f"


def setup_definitions(backend: Backend) -> None:
    d = backend.definitions
    for project in ("demo", "other"):
        d.project_create(ProjectCreateParams(project_id=project))
        d.task_publish(TaskPublishParams(project_id=project, task_id="hello", name="Hello",
                                         spec=CommandSpec(command=ShellCommand(command="echo hi"))))
    for project, trigger in (("demo", "t1"), ("demo", "t2"), ("other", "t1")):
        d.trigger_publish(TriggerPublishParams(project_id=project, trigger_id=trigger, task_id="hello",
                                               expression=YEARLY, timezone="UTC"))


@dataclass
class Admitted:
    backend: Backend
    base_ms: int  # a whole second at or before the adapter's "now" when the fixture ran

    def ids(self, params: RunListParams) -> list[str]:
        return [run.id for run in self.backend.runs.run_list(params)]


@pytest.fixture
def admitted(backend: Backend) -> Admitted:
    """Five queued-or-finished Runs across two projects, admitted by the scheduler.

    | run | project/trigger | scheduled for | status    |
    | R1  | demo/t1         | base - 9 s    | queued    |
    | R3  | demo/t2         | base - 6 s    | queued    |
    | R2  | demo/t1         | base - 6 s    | queued    |
    | R4  | other/t1        | base - 3 s    | queued    |
    | R5  | demo/t2         | base - 1 s    | succeeded |
    """
    setup_definitions(backend)
    base = backend.now_ms() // 1000 * 1000
    plan = [(R1, "demo", "t1", 9), (R3, "demo", "t2", 6), (R2, "demo", "t1", 6),
            (R4, "other", "t1", 3), (R5, "demo", "t2", 1)]
    for run_id, project, trigger, seconds_before in plan:
        got = backend.admit(project, trigger, base - seconds_before * 1000, run_id=run_id)
        assert got == run_id
    backend.force_run_status(R5, "succeeded")
    return Admitted(backend, base)


def test_run_list_is_newest_first_and_oldest_first_on_request(admitted: Admitted) -> None:
    # R2 and R3 share a scheduled time: the id breaks the tie (descending, then ascending).
    assert admitted.ids(RunListParams()) == [R5, R4, R2, R3, R1]
    assert admitted.ids(RunListParams(oldest_first=True)) == [R1, R3, R2, R4, R5]
    runs = admitted.backend.runs.run_list(RunListParams(oldest_first=True))
    base = admitted.base_ms
    assert [r.scheduled_for_ms for r in runs] == [base - 9000, base - 6000, base - 6000, base - 3000,
                                                  base - 1000]
    assert all(str(uuid.UUID(r.id)) == r.id for r in runs)  # Run ids are UUIDs, stored canonically


def test_run_list_filters_by_project_trigger_and_status(admitted: Admitted) -> None:
    ids = admitted.ids
    assert ids(RunListParams(project_id="demo")) == [R5, R2, R3, R1]
    assert ids(RunListParams(project_id="other")) == [R4]
    assert ids(RunListParams(trigger_id="t1")) == [R4, R2, R1]  # the same trigger id in two projects
    assert ids(RunListParams(project_id="demo", trigger_id="t1")) == [R2, R1]
    assert ids(RunListParams(project_id="demo", trigger_id="t2", oldest_first=True)) == [R3, R5]
    assert ids(RunListParams(trigger_id="never-published")) == []
    assert ids(RunListParams(status="queued")) == [R4, R2, R3, R1]
    assert ids(RunListParams(status="succeeded")) == [R5]
    assert ids(RunListParams(status="failed")) == []
    assert ids(RunListParams(project_id="other", status="succeeded")) == []
    assert ids(RunListParams(project_id="demo", trigger_id="t2", status="queued")) == [R3]


def test_run_list_limit_bounds(admitted: Admitted) -> None:
    ids = admitted.ids
    assert ids(RunListParams(limit=1)) == [R5]
    assert ids(RunListParams(limit=2, oldest_first=True)) == [R1, R3]
    assert ids(RunListParams(limit=4, project_id="demo")) == [R5, R2, R3, R1]
    assert ids(RunListParams(limit=10_000)) == [R5, R4, R2, R3, R1]
    for limit in (0, -1, 10_001):
        with pytest.raises(InvalidInput, match="limit"):
            admitted.backend.runs.run_list(RunListParams(limit=limit))


def test_run_list_refuses_unknown_or_malformed_filters(admitted: Admitted) -> None:
    runs = admitted.backend.runs
    with pytest.raises(NotFound, match="nope"):
        runs.run_list(RunListParams(project_id="nope"))
    with pytest.raises(InvalidInput):
        runs.run_list(RunListParams(project_id="Bad Id"))
    with pytest.raises(InvalidInput):
        runs.run_list(RunListParams(trigger_id="bad id"))


def test_run_get_by_full_id_and_unique_prefix(admitted: Admitted) -> None:
    runs = admitted.backend.runs
    listed = {run.id: run for run in runs.run_list(RunListParams())}
    for run_id in (R1, R2, R3, R4, R5):
        detail = runs.run_get(run_id)
        assert detail.run == listed[run_id]
        assert [a.run_id for a in detail.attempts] == [run_id]
        assert [e.run_id for e in detail.events] == [run_id, run_id]
    assert runs.run_get(R4[:8]).run.id == R4  # the shortest prefix accepted
    assert runs.run_get("0a1b2c3d-0").run.id == R1
    assert runs.run_get("0a1b2c3d-1").run.id == R2
    assert runs.run_get(R5.upper()).run.id == R5  # UUIDs are case-insensitive
    assert runs.run_get(R5[:13].upper()).run.id == R5


def test_run_get_refuses_ambiguous_short_unknown_and_malformed_ids(admitted: Admitted) -> None:
    runs = admitted.backend.runs
    with pytest.raises(InvalidInput, match="more than one"):
        runs.run_get("0a1b2c3d")  # R1 and R2
    with pytest.raises(InvalidInput, match="more than one"):
        runs.run_get("0a1b2c3d-")
    with pytest.raises(InvalidInput, match=r"prefix too short \(at least 8 characters\)"):
        runs.run_get(R4[:7])  # unique, but shorter than 8 characters
    with pytest.raises(NotFound):
        runs.run_get("00000000-0000-4000-8000-000000000000")  # well-formed, never admitted
    with pytest.raises(NotFound):
        runs.run_get("deadbeef")
    for malformed in ("", "run-1!", "0a1b2c3d%", "0a1b2c3d_", "g" * 8, R1 + "0"):
        with pytest.raises(InvalidInput):
            runs.run_get(malformed)


def test_an_admitted_run_has_the_documented_shape(backend: Backend) -> None:
    """One occurrence: a queued Run, its claimed first Attempt, run.created then run.queued."""
    setup_definitions(backend)
    [task] = [view.revision for view in backend.definitions.task_list("demo")]
    [trigger] = backend.definitions.trigger_list("demo", "t1")
    before = backend.now_ms()
    due = before // 1000 * 1000 - 2000
    run_id = backend.admit("demo", "t1", due)  # ids from the coordinator's own generator
    after = backend.now_ms()

    assert uuid.UUID(run_id).version == 4 and str(uuid.UUID(run_id)) == run_id
    detail = backend.runs.run_get(run_id)
    run = detail.run
    assert before <= run.created_at_ms <= after
    assert run == Run(
        id=run_id,
        project_id="demo",
        task_id="hello",
        task_revision=f"qltd:v1:1:{task.content_digest}",
        task_name="Hello",
        trigger_id="t1",
        trigger_revision=1,
        scheduled_for_ms=due,
        status="queued",
        version=2,
        event_sequence=2,
        idempotency_key=f"ql3:cron:v1:t1:1:{due}",
        created_at_ms=run.created_at_ms,
        queued_at_ms=run.created_at_ms,
        started_at_ms=None,
        finished_at_ms=None,
        error_code=None,
        error_summary=None,
        execution_origin="scheduled_system",
        triggered_by="t1",
    )
    assert backend.runs.run_list(RunListParams()) == [run]

    [attempt] = detail.attempts
    assert str(uuid.UUID(attempt.id)) == attempt.id != run_id
    assert (attempt.run_id, attempt.attempt, attempt.status, attempt.executor_type) == (
        run_id, 1, "claimed", backend.executor_type)
    assert attempt.created_at_ms == run.created_at_ms
    assert (attempt.pid, attempt.executor_handle, attempt.log_path, attempt.started_at_ms,
            attempt.finished_at_ms, attempt.exit_code, attempt.error_code, attempt.error_summary) == (
        None, None, None, None, None, None, None, None)

    created, queued = detail.events
    assert len({run_id, attempt.id, created.id, queued.id}) == 4
    assert all(str(uuid.UUID(e.id)) == e.id for e in detail.events)
    assert [(e.sequence, e.type, e.actor_type, e.attempt_id, e.created_at_ms) for e in detail.events] == [
        (1, "run.created", "scheduler", None, run.created_at_ms),
        (2, "run.queued", "scheduler", attempt.id, run.created_at_ms),
    ]
    assert created.actor_id == queued.actor_id and created.actor_id
    payload = dict(created.payload)
    decided = payload.pop("decided_at_ms")
    assert isinstance(decided, int) and before <= decided <= run.created_at_ms
    digest = payload.pop("execution_revision_digest")
    assert isinstance(digest, str) and len(digest) == 64 and int(digest, 16) >= 0
    fence = {key: payload.pop(key) for key in ("claim_owner", "claim_token", "claim_version")
             if key in payload}
    assert payload == {
        "status": "created",
        "version": 1,
        "execution_owner": "runtime",
        "executor_type": backend.executor_type,
        "trigger_revision": 1,
        "trigger_content_digest": trigger.revision.content_digest,
        "scheduled_for_ms": due,
        "misfired": False,
    }
    # every database records the claim the admission committed under
    assert fence["claim_owner"] == SCHEDULER_OWNER
    assert isinstance(fence["claim_version"], int) and fence["claim_version"] >= 1
    assert str(uuid.UUID(str(fence["claim_token"]))) == fence["claim_token"]
    assert queued.payload == {"from_status": "created", "to_status": "queued", "version": 2}
