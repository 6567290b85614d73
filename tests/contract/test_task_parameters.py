"""Task parameters (issue 21, item 3) at the stores, on every database: a scheduled Run
records every parameter's default, a run now records the values it gives (the others'
defaults), a refused value admits nothing, the same request id with other values is refused,
and the lease hands the Run's values to its executor."""

from __future__ import annotations

import json

import pytest

from qinglong.domain.manual import ManualRequest
from qinglong.domain.parameters import Parameter, ParamType
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import InvalidInput, RequestIdConflict
from qinglong.storage.admission.params import ManualRunParams
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.runs.params import LeaseAcquireParams
from tests.contract.conftest import Backend
from tests.contract.test_manual_runs import manual_store

YEARLY = "0 0 1 1 *"
DECLARED = (Parameter(name="who", type=ParamType.STRING, default="world"),
            Parameter(name="count", type=ParamType.INTEGER, default=2))


@pytest.fixture
def declared(backend: Backend) -> Backend:
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(
        project_id="demo", task_id="greet", name="greet",
        spec=CommandSpec(command=ShellCommand(command="true"), parameters=DECLARED)))
    d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="yearly",
                                           task_id="greet", expression=YEARLY, timezone="UTC"))
    return backend


def stored(backend: Backend, run_id: str) -> object:
    [row] = backend.sql("SELECT parameters FROM runs WHERE id = ?", run_id)
    value = row["parameters"]
    return json.loads(value) if isinstance(value, str) else value


def run_now(backend: Backend, request_id: str, **values: object) -> str:
    result = manual_store(backend).run_admit_manual(ManualRunParams(request=ManualRequest(
        project_id="demo", task_id="greet", request_id=request_id, actor="alice",
        parameters=values)))
    return result.run_id


def counts(backend: Backend) -> tuple[int, int]:
    [row] = backend.sql("SELECT (SELECT count(*) FROM runs) AS r, "
                        "(SELECT count(*) FROM run_events) AS e")
    return int(row["r"]), int(row["e"])


def test_a_scheduled_run_records_the_defaults(declared: Backend) -> None:
    run_id = declared.admit("demo", "yearly", declared.now_ms() // 1000 * 1000 - 1000)
    assert stored(declared, run_id) == {"count": 2, "who": "world"}
    assert declared.runs.run_get(run_id).run.parameters == {"count": 2, "who": "world"}


def test_a_run_now_records_its_values_and_the_lease_hands_them_over(declared: Backend) -> None:
    run_id = run_now(declared, "r-1", count="5")
    assert stored(declared, run_id) == {"count": 5, "who": "world"}
    [lease] = declared.lifecycle.lease_acquire(LeaseAcquireParams(owner="w", lease_ms=30_000,
                                                                  limit=5))
    assert lease.fence.run_id == run_id
    assert lease.parameters == {"count": 5, "who": "world"}
    assert run_now(declared, "r-1", count=5) == run_id  # the same values: the same Run


@pytest.mark.parametrize(("values", "problem"), [
    ({"count": "five"}, "not an integer"), ({"nope": "1"}, "no parameter 'nope'"),
    ({"who": 7}, "not text")])
def test_a_refused_value_admits_nothing(declared: Backend, values: dict[str, object],
                                        problem: str) -> None:
    before = counts(declared)
    with pytest.raises(InvalidInput, match=problem):
        run_now(declared, "r-bad", **values)
    assert counts(declared) == before


def test_a_request_id_sent_again_with_other_values_is_refused(declared: Backend) -> None:
    run_id = run_now(declared, "r-2", who="there")
    with pytest.raises(RequestIdConflict, match="other parameter values"):
        run_now(declared, "r-2", who="elsewhere")
    assert run_now(declared, "r-2", who="there") == run_id
