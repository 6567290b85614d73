"""DefinitionStore contract: projects, tasks with execution revisions, triggers."""

from __future__ import annotations

import pytest

from qinglong.domain.model import ProjectStatus
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import Conflict, InvalidInput, NotFound, RecordCorrupt
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from tests.contract.conftest import Backend


def spec(command: str = "echo hi") -> CommandSpec:
    return CommandSpec(command=ShellCommand(command=command), timeout_ms=60_000)


def publish_task(backend: Backend, task: str = "hello", command: str = "echo hi",
                 project: str = "demo", **kw: object):
    return backend.definitions.task_publish(
        TaskPublishParams(project_id=project, task_id=task, name=task, spec=spec(command), **kw)  # type: ignore[arg-type]
    )


def publish_trigger(backend: Backend, trigger: str = "t1", **kw: object):
    params: dict[str, object] = {"project_id": "demo", "trigger_id": trigger}
    params.update(kw)
    return backend.definitions.trigger_publish(TriggerPublishParams(**params))  # type: ignore[arg-type]


@pytest.fixture
def demo(backend: Backend) -> Backend:
    backend.definitions.project_create(ProjectCreateParams(project_id="demo"))
    return backend


def test_project_lifecycle(backend: Backend) -> None:
    created = backend.definitions.project_create(ProjectCreateParams(project_id="p1", name="First"))
    assert (created.id, created.name, created.status, created.version) == ("p1", "First", ProjectStatus.ACTIVE, 1)
    with pytest.raises(Conflict):
        backend.definitions.project_create(ProjectCreateParams(project_id="p1"))
    archived = backend.definitions.project_archive("p1")
    assert archived.status is ProjectStatus.ARCHIVED and archived.version == 2
    with pytest.raises(Conflict):
        backend.definitions.project_archive("p1")
    with pytest.raises(NotFound):
        backend.definitions.project_archive("nope")
    with pytest.raises(InvalidInput):
        backend.definitions.project_create(ProjectCreateParams(project_id="Bad Id"))
    assert [p.id for p in backend.definitions.project_list()] == ["p1"]


def test_task_publish_revisions_and_noop(demo: Backend) -> None:
    first = publish_task(demo)
    assert first.created and first.revision.revision == 1
    again = publish_task(demo)
    assert not again.created and again.revision.revision == 1
    assert again.revision.content_digest == first.revision.content_digest
    changed = publish_task(demo, command="echo changed")
    assert changed.created and changed.revision.revision == 2
    assert changed.revision.content_digest != first.revision.content_digest
    [current] = [view.revision for view in demo.definitions.task_list("demo")]
    assert current.revision == 2 and current.spec.command.argv()[-1] == "echo changed"


def test_task_publish_refuses_unknown_and_archived_project(demo: Backend) -> None:
    with pytest.raises(NotFound):
        demo.definitions.task_publish(
            TaskPublishParams(project_id="other", task_id="x", name="x", spec=spec())
        )
    demo.definitions.project_archive("demo")
    with pytest.raises(Conflict, match="archived"):
        publish_task(demo)


def test_trigger_publish_new_and_noop_keep_schedule(demo: Backend) -> None:
    publish_task(demo)
    with pytest.raises(NotFound):
        publish_trigger(demo, task_id="missing", expression="* * * * *", timezone="UTC")
    with pytest.raises(InvalidInput):
        publish_trigger(demo, task_id="hello", timezone="UTC")  # no cron
    created = publish_trigger(demo, task_id="hello", expression="*/5  *  * * *", timezone="US/Eastern")
    assert created.created and created.revision.revision == 1
    assert created.revision.spec.expression == "*/5 * * * *"
    assert created.revision.spec.timezone == "America/New_York"
    [view] = demo.definitions.trigger_list("demo")
    assert view.schedule is not None and view.schedule.next_fire_at_ms is None
    assert view.schedule.state_version == 0 and view.firing
    same = publish_trigger(demo, expression="*/5 * * * *")
    assert not same.created
    [view] = demo.definitions.trigger_list("demo")
    assert view.schedule is not None and view.schedule.state_version == 0


def test_trigger_republish_resets_schedule_and_merges_parts(demo: Backend) -> None:
    publish_task(demo)
    publish_trigger(demo, task_id="hello", expression="* * * * *", timezone="UTC", misfire_policy="fire_once")
    changed = publish_trigger(demo, timezone="Asia/Shanghai")
    assert changed.created and changed.revision.revision == 2
    assert changed.revision.spec.expression == "* * * * *"
    assert changed.revision.spec.misfire_policy.value == "fire_once"
    [view] = demo.definitions.trigger_list("demo")
    assert view.schedule is not None
    assert (view.schedule.trigger_revision, view.schedule.state_version) == (2, 1)
    assert view.schedule.next_fire_at_ms is None


def test_trigger_is_bound_to_its_task_for_life(demo: Backend) -> None:
    publish_task(demo, "a")
    publish_task(demo, "b")
    publish_trigger(demo, task_id="a", expression="* * * * *", timezone="UTC")
    with pytest.raises(Conflict, match="bound to task"):
        publish_trigger(demo, task_id="b")


def test_disable_enable_and_disabled_task_rules(demo: Backend) -> None:
    publish_task(demo)
    publish_trigger(demo, task_id="hello", expression="* * * * *", timezone="UTC")
    disabled = publish_trigger(demo, enabled=False)
    assert disabled.created and not disabled.revision.enabled
    [view] = demo.definitions.trigger_list("demo")
    assert not view.firing
    publish_task(demo, command="echo hi", enabled=False)
    with pytest.raises(Conflict, match="disabled"):
        publish_trigger(demo, enabled=True)
    with pytest.raises(NotFound):
        publish_trigger(demo, trigger="never-published", enabled=False)


def test_task_publish_repins_triggers_unless_asked_not_to(demo: Backend) -> None:
    publish_task(demo)
    publish_trigger(demo, "t1", task_id="hello", expression="* * * * *", timezone="UTC")
    publish_trigger(demo, "t2", task_id="hello", expression="0 * * * *", timezone="UTC")
    result = publish_task(demo, command="echo v2")
    assert result.repinned_triggers == ("t1", "t2")
    views = demo.definitions.trigger_list("demo")
    assert [(v.revision.revision, v.revision.task_revision, v.task_pin_current) for v in views] == [
        (2, 2, True),
        (2, 2, True),
    ]
    kept = publish_task(demo, command="echo v3", repin_triggers=False)
    assert kept.repinned_triggers == ()
    views = demo.definitions.trigger_list("demo")
    assert all(not v.task_pin_current and not v.firing for v in views)


def test_disabled_task_revision_does_not_repin(demo: Backend) -> None:
    publish_task(demo)
    publish_trigger(demo, task_id="hello", expression="* * * * *", timezone="UTC")
    result = publish_task(demo, enabled=False)
    assert result.repinned_triggers == ()
    [view] = demo.definitions.trigger_list("demo")
    assert view.revision.task_revision == 1 and not view.task_pin_current


def test_archived_project_stops_triggers(demo: Backend) -> None:
    publish_task(demo)
    publish_trigger(demo, task_id="hello", expression="* * * * *", timezone="UTC")
    demo.definitions.project_archive("demo")
    [view] = demo.definitions.trigger_list("demo")
    assert not view.project_active and not view.firing


def test_tampered_trigger_revision_fails_closed(demo: Backend) -> None:
    publish_task(demo)
    publish_trigger(demo, task_id="hello", expression="* * * * *", timezone="UTC")
    assert demo.tamper_trigger_spec("* * * * *", "0 * * * *") == 1
    with pytest.raises(RecordCorrupt, match="digest"):
        demo.definitions.trigger_list("demo")


def test_tampered_task_revision_fails_closed(demo: Backend) -> None:
    publish_task(demo)
    assert demo.rename_task_revision("renamed") == 1
    with pytest.raises(RecordCorrupt):
        demo.definitions.task_list("demo")


def test_publishers_stamp_times_from_the_adapter_clock(backend: Backend) -> None:
    """The fake node clock on SQLite; clock_timestamp() on PostgreSQL, read inside the publish."""
    before = backend.now_ms()
    project = backend.definitions.project_create(ProjectCreateParams(project_id="demo"))
    after = backend.now_ms()
    assert before <= project.created_at_ms <= after
    assert project.updated_at_ms == project.created_at_ms

    backend.let_time_pass()
    before = backend.now_ms()
    task = publish_task(backend).revision
    after = backend.now_ms()
    assert before <= task.created_at_ms <= after and task.created_at_ms > project.created_at_ms
    [listed] = [view.revision for view in backend.definitions.task_list("demo")]
    assert listed.created_at_ms == task.created_at_ms

    backend.let_time_pass()
    before = backend.now_ms()
    trigger = publish_trigger(backend, task_id="hello", expression="* * * * *", timezone="UTC").revision
    after = backend.now_ms()
    assert before <= trigger.created_at_ms <= after and trigger.created_at_ms > task.created_at_ms
    [view] = backend.definitions.trigger_list("demo")
    assert view.revision.created_at_ms == trigger.created_at_ms
    assert view.schedule is not None and view.schedule.updated_at_ms == trigger.created_at_ms

    backend.let_time_pass()
    noop = publish_task(backend)  # identical content: nothing is written, nothing restamped
    assert not noop.created and noop.revision.created_at_ms == task.created_at_ms
    before = backend.now_ms()
    archived = backend.definitions.project_archive("demo")
    after = backend.now_ms()
    assert archived.created_at_ms == project.created_at_ms
    assert before <= archived.updated_at_ms <= after and archived.updated_at_ms > trigger.created_at_ms
    assert backend.definitions.project_get("demo") == archived
