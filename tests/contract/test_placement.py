"""Placement (issue 21, item 2) at the store, on every database: a task's required worker
labels are recorded on each of its Runs when it is admitted (by the scheduler and by run
now), and a lease takes a Run only for an executor whose labels meet every requirement; the
Runs it passes over stay queued, unlocked, for an executor that can take them, and do not
hold up the Runs queued behind them. A worker's labels are recorded with its registration,
and the queue read for /metrics groups the queued Runs by requirement set and marks the sets
no live worker offers."""

from __future__ import annotations

import json

import psycopg
import pytest

from qinglong.domain.manual import ManualRequest
from qinglong.domain.placement import label_tokens
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import InvalidInput
from qinglong.service.queue import read_queue
from qinglong.storage.admission.params import ManualRunParams
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.instances import InstanceStore
from qinglong.storage.runs.params import AttemptLease, LeaseAcquireParams, LeaseRescueParams
from qinglong.storage.sqlfile import load_queries
from tests.contract.conftest import Backend, PgBackend
from tests.contract.test_leases import run_to_running
from tests.contract.test_manual_runs import manual_store
from tests.contract.test_retries_and_overlap import RETRIES, RETRY_WAIT_OVER_MS, finish

YEARLY = "0 0 1 1 *"
LEASE_MS = 30_000
# task -> what it requires
TASKS = {"plain": (), "gpu": ("gpu",), "eu-gpu": ("gpu", "region=eu")}


def _setup(backend: Backend) -> None:
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    for task, requires in TASKS.items():
        d.task_publish(TaskPublishParams(
            project_id="demo", task_id=task, name=task,
            spec=CommandSpec(command=ShellCommand(command="true"), requires=requires)))
        d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id=task, task_id=task,
                                               expression=YEARLY, timezone="UTC"))


@pytest.fixture
def runs(backend: Backend) -> dict[str, str]:
    """One queued Run of each task, admitted by the scheduler, oldest first: gpu, eu-gpu,
    plain (so the Runs a worker without labels cannot take are ahead of the one it can)."""
    _setup(backend)
    base = backend.now_ms() // 1000 * 1000
    return {task: backend.admit("demo", task, base - seconds * 1000)
            for task, seconds in (("gpu", 9), ("eu-gpu", 6), ("plain", 3))}


def acquire(backend: Backend, labels: dict[str, str | None], owner: str = "w1",
            limit: int = 10) -> list[AttemptLease]:
    return backend.lifecycle.lease_acquire(LeaseAcquireParams(
        owner=owner, lease_ms=LEASE_MS, limit=limit,
        label_tokens=tuple(label_tokens(labels))))


def stored_requires(backend: Backend, run_id: str) -> list[str] | None:
    [row] = backend.sql("SELECT requires FROM runs WHERE id = ?", run_id)
    value = row["requires"]
    return json.loads(value) if isinstance(value, str) else value  # jsonb arrives decoded


def test_each_run_records_its_tasks_requirements(backend: Backend,
                                                 runs: dict[str, str]) -> None:
    assert {task: stored_requires(backend, run_id) for task, run_id in runs.items()} == {
        "plain": None, "gpu": ["gpu"], "eu-gpu": ["gpu", "region=eu"]}


def test_a_worker_without_labels_takes_only_runs_that_require_none(
        backend: Backend, runs: dict[str, str]) -> None:
    # the two older Runs it cannot take do not hold up the plain one behind them
    [lease] = acquire(backend, {}, limit=1)
    assert lease.fence.run_id == runs["plain"]
    assert acquire(backend, {}) == []
    for task in ("gpu", "eu-gpu"):
        assert backend.runs.run_get(runs[task]).run.status == "queued"


def test_a_bare_requirement_is_met_by_the_label_with_any_value(
        backend: Backend, runs: dict[str, str]) -> None:
    leased = acquire(backend, {"gpu": "a100", "region": "us"})
    assert {lease.fence.run_id for lease in leased} == {runs["gpu"], runs["plain"]}
    assert backend.runs.run_get(runs["eu-gpu"]).run.status == "queued"
    [lease] = acquire(backend, {"gpu": None, "region": "eu", "disk": "ssd"}, owner="w2")
    assert lease.fence.run_id == runs["eu-gpu"]
    assert lease.execution is not None and lease.execution.plan.requires == ("gpu", "region=eu")


def test_a_value_is_not_met_by_another_value_or_by_the_bare_label(
        backend: Backend, runs: dict[str, str]) -> None:
    leased = acquire(backend, {"gpu": None, "region": "us"})
    assert sorted(lease.task_id for lease in leased) == ["gpu", "plain"]
    assert acquire(backend, {"gpu": None, "region": None}, owner="w2") == []
    assert acquire(backend, {"region": "eu"}, owner="w3") == []
    assert backend.runs.run_get(runs["eu-gpu"]).run.status == "queued"


def test_a_run_now_records_the_requirements_too(backend: Backend) -> None:
    _setup(backend)
    result = manual_store(backend).run_admit_manual(ManualRunParams(request=ManualRequest(
        project_id="demo", task_id="eu-gpu", trigger_id=None, request_id="r-1",
        actor="alice")))
    assert result.run_id is not None
    assert stored_requires(backend, result.run_id) == ["gpu", "region=eu"]
    assert acquire(backend, {"gpu": None}) == []
    [lease] = acquire(backend, {"gpu": None, "region": "eu"})
    assert lease.fence.run_id == result.run_id


def test_a_stored_requirement_list_must_be_canonical(backend: Backend) -> None:
    _setup(backend)
    with pytest.raises(InvalidInput, match="requires"):
        CommandSpec(command=ShellCommand(command="true"), requires=("gpu", "gpu=a100"))
    # the spec puts them in order, each once; the stored revision holds that form
    spec = CommandSpec(command=ShellCommand(command="true"), requires=("region=eu", "gpu"))
    assert spec.requires == ("gpu", "region=eu")
    assert spec.config_json()["requires"] == ["gpu", "region=eu"]
    assert "requires" not in CommandSpec(command=ShellCommand(command="true")).config_json()


def test_a_worker_registers_with_its_labels(backend: Backend) -> None:
    store = InstanceStore(backend.database("ql_worker", "placement"))
    store.instance_start("w-eu", "worker", "host-a", 4242, labels={"region": "eu", "gpu": None})
    store.instance_start("w-plain", "worker", "host-b", 4243)
    found = {i.instance_id: dict(i.labels) for i in store.instance_list()}
    assert found == {"w-eu": {"gpu": None, "region": "eu"}, "w-plain": {}}


def test_the_queue_by_requirement_marks_what_no_live_worker_offers(
        backend: Backend, runs: dict[str, str]) -> None:
    del runs
    store = InstanceStore(backend.database("ql_worker", "placement"))
    store.instance_start("w-gpu", "worker", "host-a", 4242, labels={"gpu": "a100"})
    store.instance_start("w-gone", "worker", "host-b", 4243, labels={"gpu": None, "region": "eu"})
    store.instance_stop("w-gone")  # a stopped worker offers nothing
    backend.sql("UPDATE runs SET queued_at_ms = queued_at_ms - ? WHERE task_id = 'eu-gpu'",
                60_000)
    sample = read_queue(backend.lifecycle)
    assert sample.depth == 3
    by_set = {group.requires: group for group in sample.requirements}
    assert {name: (g.depth, g.unplaceable) for name, g in by_set.items()} == {
        "gpu": (1, False), "gpu,region=eu": (1, True)}
    assert 60_000 <= by_set["gpu,region=eu"].oldest_age_ms < 600_000
    assert by_set["gpu"].oldest_age_ms < 60_000
    store.instance_start("w-eu", "worker", "host-c", 4244, labels={"gpu": None, "region": "eu"})
    assert not any(group.unplaceable for group in read_queue(backend.lifecycle).requirements)


def test_an_empty_queue_is_one_read_with_no_placement(
        backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """/metrics samples the queue every few seconds in every replica: with nothing queued
    the placement (three more statements) is not read at all."""
    store = backend.lifecycle

    def refuse(*args: object) -> None:
        raise AssertionError("the placement was read for an empty queue")

    monkeypatch.setattr(store, "queue_placement", refuse)
    sample = read_queue(store)
    assert (sample.depth, sample.oldest_age_ms, sample.requirements) == (0, None, ())


def test_a_retried_run_and_one_whose_worker_died_keep_their_requirements(
        backend: Backend) -> None:
    """A retry and a takeover after a worker died queue the same Run again: it still goes
    only to a worker with the labels."""
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(
        project_id="demo", task_id="gpu", name="gpu",
        spec=CommandSpec(command=ShellCommand(command="true"), requires=("gpu",),
                         retry=RETRIES, idempotent=True)))
    d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="gpu", task_id="gpu",
                                           expression=YEARLY, timezone="UTC"))
    run_id = backend.admit("demo", "gpu", backend.now_ms() // 1000 * 1000 - 1000)
    gpu = {"gpu": None}
    finish(backend, acquire(backend, gpu)[0])  # fails: a retry is due later
    backend.age_retries(RETRY_WAIT_OVER_MS)
    assert backend.lifecycle.retry_promote(10) == [run_id]
    assert acquire(backend, {}) == []
    [second] = acquire(backend, gpu, owner="w2")
    run_to_running(backend, second.fence)
    backend.age_leases(60_000)  # w2 died holding it
    [rescued] = backend.lifecycle.lease_rescue(LeaseRescueParams())
    assert rescued.outcome == "retry"
    backend.age_retries(RETRY_WAIT_OVER_MS)
    assert backend.lifecycle.retry_promote(10) == [run_id]
    assert acquire(backend, {"region": "eu"}) == []
    [third] = acquire(backend, gpu, owner="w3")
    assert (third.fence.run_id, third.attempt) == (run_id, 3)
    assert stored_requires(backend, run_id) == ["gpu"]


def test_a_lease_in_flight_locks_only_the_runs_its_worker_can_take(
        pg_backend: PgBackend) -> None:
    """Two workers lease at the same moment (PostgreSQL): one without labels holds its lease
    statement's transaction open; a gpu worker's lease still gets the gpu Run (had the first
    statement locked it, SKIP LOCKED would have passed it over), and not the plain Run the
    first one holds."""
    backend = pg_backend
    _setup(backend)
    base = backend.now_ms() // 1000 * 1000
    gpu = backend.admit("demo", "gpu", base - 9_000)
    backend.admit("demo", "plain", base - 6_000)
    statement = load_queries("qinglong.storage.postgres")["lease_candidates"]
    with psycopg.connect(backend.db.url("ql_worker"), autocommit=False) as held:
        rows = held.execute(statement, {"executor_type": backend.executor_type,
                                        "labels": "[]", "limit": 10}).fetchall()
        assert len(rows) == 1  # the plain Run, locked until this transaction ends
        [lease] = acquire(backend, {"gpu": None}, owner="w-gpu")
        assert lease.fence.run_id == gpu
        held.rollback()
