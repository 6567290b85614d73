"""DefinitionStore contract, continued: unarchive, deleting and restoring tasks and triggers,
history, listings across projects, and publishes that must not overwrite a concurrent one."""

from __future__ import annotations

import pytest

from qinglong.domain.model import ProjectStatus
from qinglong.errors import Conflict, NotFound
from qinglong.storage.definitions.params import ProjectCreateParams
from tests.contract.conftest import Backend
from tests.contract.test_definitions import publish_task, publish_trigger


@pytest.fixture
def demo(backend: Backend) -> Backend:
    backend.definitions.project_create(ProjectCreateParams(project_id="demo"))
    publish_task(backend)
    publish_trigger(backend, task_id="hello", expression="0 0 * * *", timezone="UTC")
    return backend


def test_unarchive_restores_a_project(demo: Backend) -> None:
    demo.definitions.project_archive("demo")
    restored = demo.definitions.project_unarchive("demo")
    assert (restored.status, restored.version) == (ProjectStatus.ACTIVE, 3)
    with pytest.raises(Conflict, match="not archived"):
        demo.definitions.project_unarchive("demo")
    with pytest.raises(NotFound):
        demo.definitions.project_unarchive("nope")
    [view] = demo.definitions.trigger_list("demo")
    assert view.state == "firing"


def test_a_deleted_trigger_stops_and_leaves_the_lists(demo: Backend) -> None:
    deleted = demo.definitions.trigger_delete("demo", "t1")
    assert deleted.state == "deleted" and not deleted.revision.enabled
    assert deleted.revision.revision == 2  # a disabled revision: the scheduler stops
    assert demo.definitions.trigger_list("demo") == []
    [hidden] = demo.definitions.trigger_list("demo", include_deleted=True)
    assert hidden.deleted_at_ms is not None
    with pytest.raises(NotFound):
        demo.definitions.trigger_delete("demo", "t1")
    with pytest.raises(NotFound):  # enabling a deleted trigger names it as missing
        publish_trigger(demo, enabled=True)
    restored = publish_trigger(demo, expression="0 1 * * *")
    assert restored.restored and restored.created and restored.revision.enabled
    assert restored.revision.task_id == "hello"  # bound to its task for life
    [view] = demo.definitions.trigger_list("demo")
    assert view.state == "firing" and view.revision.spec.expression == "0 1 * * *"


def test_a_task_is_deleted_only_when_no_trigger_uses_it(demo: Backend) -> None:
    with pytest.raises(Conflict, match="t1"):
        demo.definitions.task_delete("demo", "hello")
    demo.definitions.trigger_delete("demo", "t1")
    deleted = demo.definitions.task_delete("demo", "hello")
    assert deleted.deleted_at_ms is not None and not deleted.revision.enabled
    assert demo.definitions.task_list("demo") == []
    assert [v.revision.task_id for v in demo.definitions.task_list("demo", include_deleted=True)] \
        == ["hello"]
    assert demo.definitions.task_get("demo", "hello").deleted_at_ms is not None
    restored = publish_task(demo)
    assert restored.restored and restored.revision.enabled
    assert demo.definitions.task_get("demo", "hello").deleted_at_ms is None


def test_task_history_lists_every_revision(demo: Backend) -> None:
    publish_task(demo, command="echo two")
    publish_task(demo, command="echo three")
    history = demo.definitions.task_history("demo", "hello")
    assert [r.revision for r in history] == [1, 2, 3]
    assert [r.spec.command.argv()[-1] for r in history] == ["echo hi", "echo two", "echo three"]
    with pytest.raises(NotFound):
        demo.definitions.task_history("demo", "nope")


def test_a_publish_prepared_on_an_old_revision_is_refused(demo: Backend) -> None:
    publish_task(demo, command="echo two")
    with pytest.raises(Conflict, match="changed while"):
        publish_task(demo, command="echo stale", expected_revision=1)
    assert demo.definitions.task_get("demo", "hello").revision.revision == 2
    assert publish_task(demo, command="echo three", expected_revision=2).revision.revision == 3


def test_trigger_enabled_none_keeps_the_state(demo: Backend) -> None:
    publish_trigger(demo, enabled=False)
    kept = publish_trigger(demo, expression="0 2 * * *", enabled=None)
    assert kept.created and not kept.revision.enabled


def test_triggers_are_listed_across_projects(demo: Backend) -> None:
    demo.definitions.project_create(ProjectCreateParams(project_id="other"))
    publish_task(demo, project="other")
    publish_trigger(demo, project_id="other", trigger_id="t9", task_id="hello",
                    expression="0 0 * * *", timezone="UTC")
    listed = [(v.revision.project_id, v.revision.trigger_id)
              for v in demo.definitions.trigger_list(None)]
    assert listed == [("demo", "t1"), ("other", "t9")]
