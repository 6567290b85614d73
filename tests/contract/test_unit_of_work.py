"""A unit of work (kernel ``Database.unit``): every store call made inside it commits together
or not at all, on every database -- the HTTP API writes a change and its audit-log row so, a
Run admitted now commits with its audit row (the admission joins the unit), and ``ql apply``
commits each project whole."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qinglong.domain.manual import ManualRequest
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.service.container import Services
from qinglong.service.definition_plan import ApplyStopped
from qinglong.service.definition_yaml import parse_text
from qinglong.storage.accounts.params import AuditListParams, AuditWriteParams
from qinglong.storage.admission.params import ManualRunParams
from qinglong.storage.definitions.params import ProjectCreateParams, TaskPublishParams
from qinglong.storage.open import Role, open_database
from qinglong.storage.runs.params import RunListParams
from qinglong.storage.stores import Stores
from tests.contract.conftest import Backend


class Refused(Exception):
    """Raised inside a unit after its writes: the unit must write nothing."""


@pytest.fixture
def web(backend: Backend) -> Iterator[Stores]:
    """The stores as the HTTP API opens them (ql_web on PostgreSQL: the role that publishes,
    admits Runs now and keeps the audit log)."""
    stores = open_database(backend.url("ql_web"), clock=backend.clock(), role=Role.WEB)
    try:
        yield stores
    finally:
        stores.close()


def _audit(stores: Stores, action: str) -> None:
    stores.accounts.audit_write(AuditWriteParams(actor="alice", via="session", action=action))


def _actions(stores: Stores) -> list[str]:
    return [entry.action for entry in stores.accounts.audit_list(AuditListParams(limit=100))]


def test_a_change_and_its_audit_row_commit_together(web: Stores) -> None:
    def create() -> None:
        web.definitions.project_create(ProjectCreateParams(project_id="both"))
        _audit(web, "project.create")

    web.db.unit("create project", create)
    assert [p.id for p in web.definitions.project_list()] == ["both"]
    assert _actions(web) == ["project.create"]


def test_a_unit_that_fails_after_its_writes_writes_nothing(web: Stores) -> None:
    def create_then_fail() -> None:
        web.definitions.project_create(ProjectCreateParams(project_id="neither"))
        _audit(web, "project.create")
        raise Refused

    with pytest.raises(Refused):
        web.db.unit("create project", create_then_fail)
    assert web.definitions.project_list() == []
    assert _actions(web) == []


def test_a_run_admitted_now_joins_the_unit_with_its_audit_row(web: Stores) -> None:
    web.definitions.project_create(ProjectCreateParams(project_id="now"))
    web.definitions.task_publish(TaskPublishParams(
        project_id="now", task_id="t", name="t",
        spec=CommandSpec(command=ShellCommand(command="true"))))
    request = ManualRequest(project_id="now", task_id="t", trigger_id=None, request_id="r1",
                            actor="alice")

    def admit(fail: bool) -> str:
        result = web.admissions.run_admit_manual(ManualRunParams(request=request))
        _audit(web, "run.now")
        if fail:
            raise Refused
        return result.run_id

    with pytest.raises(Refused):
        web.db.unit("run now", lambda: admit(True))
    assert web.runs.run_list(RunListParams(project_id="now")) == []
    assert _actions(web) == []
    run_id = web.db.unit("run now", lambda: admit(False))
    assert _actions(web) == ["run.now"]
    assert [run.id for run in web.runs.run_list(RunListParams(project_id="now"))] == [run_id]


TWO_PROJECTS = """\
apiVersion: qinglong/v1
project: alpha
tasks:
  first: {shell: echo first}
---
apiVersion: qinglong/v1
project: beta
tasks:
  fresh: {shell: echo fresh}
  moved: {shell: echo as the files say}
triggers:
  often: {task: fresh, cron: "* * * * *", timezone: UTC}
"""


def test_apply_commits_each_project_whole_or_not_at_all(web: Stores, backend: Backend) -> None:
    """``ql apply`` writes a project in one unit: a write refused half-way through a project
    (a task republished since the plan) leaves none of that project's changes, while the
    projects before it stay written."""
    definitions = web.definitions
    definitions.project_create(ProjectCreateParams(project_id="beta"))
    moved = TaskPublishParams(project_id="beta", task_id="moved", name="moved",
                              spec=CommandSpec(command=ShellCommand(command="echo before")))
    definitions.task_publish(moved)
    services = Services(stores=web, clock=backend.clock())
    plan = services.declarative.plan(parse_text(TWO_PROJECTS))
    assert [(c.label, c.action.value) for c in plan.writes] == [
        ("alpha", "create"), ("alpha/first", "create"), ("beta/fresh", "create"),
        ("beta/moved", "change"), ("beta/often", "create")]
    # someone republishes beta/moved between the plan and the apply
    definitions.task_publish(TaskPublishParams(
        project_id="beta", task_id="moved", name="moved", expected_revision=1,
        spec=CommandSpec(command=ShellCommand(command="echo by someone else"))))

    heard: list[str] = []
    with pytest.raises(ApplyStopped) as stopped:
        services.declarative.apply(plan, on_change=lambda c: heard.append(c.label))
    assert stopped.value.change.label == "beta/moved"
    assert [c.label for c in stopped.value.written] == ["alpha", "alpha/first"]
    assert [c.label for c in stopped.value.not_written] == ["beta/fresh", "beta/moved",
                                                            "beta/often"]
    assert heard == ["alpha", "alpha/first"]  # told only of what committed
    assert [t.revision.task_id for t in definitions.task_list("alpha", True)] == ["first"]
    # beta/fresh was written inside beta's unit before beta/moved was refused: rolled back
    assert [t.revision.task_id for t in definitions.task_list("beta", True)] == ["moved"]
    assert definitions.trigger_list("beta", None, True) == []

    replanned = services.declarative.plan(parse_text(TWO_PROJECTS))  # again: only beta is left
    assert {c.label for c in replanned.writes} == {"beta/often", "beta/fresh", "beta/moved"}
    services.declarative.apply(replanned)
    assert sorted(t.revision.task_id for t in definitions.task_list("beta", True)) == [
        "fresh", "moved"]
    assert [t.revision.trigger_id for t in definitions.trigger_list("beta", None, True)] == [
        "often"]
