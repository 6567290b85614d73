"""Labels on tasks and triggers, a user's pins and saved filters (issue 23, item 1;
migrations 0027_labels/0028_pins on PostgreSQL, 0026_labels/0027_pins on SQLite), on SQLite and
on every PostgreSQL server, as the HTTP API opens the stores (ql_web):

- a set of labels replaces the old one whole, is checked (characters, length, how many),
  needs a live task or trigger, publishes nothing (no new revision, the same digests) and
  shows on the task and trigger views;
- the task and trigger listings and the dashboard's summary filter on a label in SQL (the
  summary's pages stay whole);
- pins belong to one user, name a live task or trigger of a project the user may read, and
  list only the projects the user may read now;
- saved filters belong to one user, are replaced by name, listed by page and deleted.
"""

from __future__ import annotations

import pytest

from qinglong.domain.organise import MAX_LABELS
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import Forbidden, InvalidInput, NotFound
from qinglong.service.accounts import Principal
from qinglong.service.container import Services
from qinglong.storage.accounts.params import UserCreateParams
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.stores import Stores
from tests.contract.conftest import Backend

YEARLY = "0 0 1 1 *"


def publish(stores: Stores, project: str, task: str, *triggers: str) -> None:
    d = stores.definitions
    d.task_publish(TaskPublishParams(project_id=project, task_id=task, name=task,
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    for trigger in triggers:
        d.trigger_publish(TriggerPublishParams(project_id=project, trigger_id=trigger,
                                               task_id=task, expression=YEARLY,
                                               timezone="UTC"))


@pytest.fixture
def world(web_demo: Stores, demo_services: Services) -> Services:
    """Project demo (tasks job, other; triggers a, b, c) and project secret (task hidden,
    trigger h); users ann (admin everywhere), tess (viewer of demo only)."""
    publish(web_demo, "demo", "job", "a", "b")
    publish(web_demo, "demo", "other", "c")
    web_demo.definitions.project_create(ProjectCreateParams(project_id="secret"))
    publish(web_demo, "secret", "hidden", "h")
    for name, role in (("ann", "admin"), ("tess", "none")):
        web_demo.accounts.user_create(UserCreateParams(username=name, role=role,
                                                       password_hash="$argon2id$x"))
    return demo_services


ANN = Principal(username="ann", role="admin", via="session")
TESS = Principal(username="tess", role="none", via="session", grants=(("demo", "viewer"),))


def test_labels_replace_whole_sets_and_show_on_the_views(world: Services) -> None:
    catalog = world.catalog
    before = catalog.task_show("demo", "job")
    view = world.labels.put("task", "demo", "job", ["nightly", "team:payments", "nightly"])
    assert view.labels == ["nightly", "team:payments"]
    shown = catalog.task_show("demo", "job")
    assert shown.labels == ["nightly", "team:payments"]
    # nothing was published: the same revision, the same digest
    assert (shown.revision, shown.content_digest) == (before.revision, before.content_digest)
    assert {t.task: t.labels for t in catalog.task_list("demo")} == {
        "job": ["nightly", "team:payments"], "other": []}
    world.labels.put("task", "demo", "job", ["eu"])
    assert catalog.task_show("demo", "job").labels == ["eu"]
    world.labels.put("trigger", "demo", "b", ["nightly"])
    assert {t.trigger: t.labels for t in catalog.trigger_list(None)} == {
        "a": [], "b": ["nightly"], "c": [], "h": []}
    world.labels.put("task", "demo", "job", [])
    assert catalog.task_show("demo", "job").labels == []


@pytest.mark.parametrize("labels,field", [
    (["Upper"], "labels[0]"), (["ok", "has space"], "labels[1]"), (["-dash"], "labels[0]"),
    (["x" * 49], "labels[0]"), ([""], "labels[0]"),
    ([f"l{i}" for i in range(MAX_LABELS + 1)], "labels")])
def test_a_bad_label_is_refused_naming_it(world: Services, labels: list[str],
                                          field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        world.labels.put("task", "demo", "job", labels)
    assert refused.value.field == field
    assert world.catalog.task_show("demo", "job").labels == []


def test_labels_need_a_live_task_or_trigger(world: Services, web_demo: Stores) -> None:
    with pytest.raises(NotFound):
        world.labels.put("task", "demo", "ghost", ["x"])
    with pytest.raises(NotFound):
        world.labels.put("trigger", "demo", "ghost", ["x"])
    web_demo.definitions.trigger_delete("demo", "c")
    with pytest.raises(NotFound):
        world.labels.put("trigger", "demo", "c", ["x"])


def test_listings_and_the_summary_filter_on_a_label(world: Services) -> None:
    world.labels.put("task", "demo", "other", ["nightly"])
    world.labels.put("trigger", "demo", "a", ["nightly", "eu"])
    world.labels.put("trigger", "demo", "c", ["nightly"])
    world.labels.put("trigger", "secret", "h", ["nightly"])
    catalog = world.catalog
    assert [t.task for t in catalog.task_list("demo", label="nightly")] == ["other"]
    assert [t.task for t in catalog.task_list("demo", label="none-such")] == []
    assert [(t.project, t.trigger) for t in catalog.trigger_list(None, label="nightly")] == [
        ("demo", "a"), ("demo", "c"), ("secret", "h")]
    assert [t.trigger for t in catalog.trigger_list("demo", label="eu")] == ["a"]
    # the summary: whole pages of labelled triggers, the visible projects only
    first = world.summaries.page(label="nightly", limit=1)
    assert [(i.trigger, i.labels) for i in first.items] == [("a", ["eu", "nightly"])]
    assert first.next_cursor is not None
    rest = world.summaries.page(label="nightly", cursor=first.next_cursor)
    assert [i.trigger for i in rest.items] == ["c", "h"]
    mine = world.summaries.page(label="nightly", visible={"demo"})
    assert [i.trigger for i in mine.items] == ["a", "c"]
    assert [i.labels for i in world.summaries.page(project="demo").items] == [
        ["eu", "nightly"], [], ["nightly"]]
    with pytest.raises(InvalidInput) as refused:
        catalog.task_list("demo", label="Not A Label")
    assert refused.value.field == "label"


def test_pins_are_per_user_and_keep_to_readable_projects(world: Services, web_demo: Stores,
                                                         backend: Backend) -> None:
    pins = world.pins
    view, added = pins.pin(TESS, "trigger", "demo", "b")
    assert (view.project, view.kind, view.id, added) == ("demo", "trigger", "b", True)
    backend.let_time_pass()
    assert pins.pin(TESS, "trigger", "demo", "b")[1] is False  # already pinned: kept first
    pins.pin(TESS, "task", "demo", "job")
    pins.pin(ANN, "trigger", "secret", "h")
    assert [(p.kind, p.id) for p in pins.pins(TESS, {"demo"})] == [("trigger", "b"),
                                                                    ("task", "job")]
    assert [(p.project, p.id) for p in pins.pins(ANN, None)] == [("secret", "h")]
    # a project the user may not read: refused before anything of it is read
    for entity in ("h", "ghost"):
        with pytest.raises(Forbidden):
            pins.pin(TESS, "trigger", "secret", entity)
    with pytest.raises(Forbidden):
        pins.pin(TESS, "trigger", "nowhere", "x")
    with pytest.raises(NotFound):
        pins.pin(TESS, "task", "demo", "ghost")
    # pins of projects no longer readable are hidden; of deleted triggers too
    assert pins.pins(ANN, {"demo"}) == []
    web_demo.definitions.trigger_delete("demo", "b")
    assert [p.id for p in pins.pins(TESS, {"demo"})] == ["job"]
    pins.unpin(TESS, "task", "demo", "job")
    with pytest.raises(NotFound):
        pins.unpin(TESS, "task", "demo", "job")
    assert pins.pins(TESS, {"demo"}) == []


def test_saved_filters_are_per_user_replaced_by_name(world: Services) -> None:
    pins = world.pins
    saved = pins.save_filter(TESS, "failed today", "runs", {"status": "failed",
                                                            "project": "demo"})
    assert (saved.name, saved.page, saved.query) == ("failed today", "runs",
                                                     {"project": "demo", "status": "failed"})
    pins.save_filter(TESS, "nightly", "dashboard", {"label": "nightly"})
    pins.save_filter(TESS, "failed today", "runs", {"status": "lost"})
    pins.save_filter(ANN, "mine", "tasks", {})
    assert [(f.name, f.query) for f in pins.filters(TESS)] == [
        ("failed today", {"status": "lost"}), ("nightly", {"label": "nightly"})]
    assert [f.name for f in pins.filters(TESS, "dashboard")] == ["nightly"]
    assert [f.name for f in pins.filters(ANN)] == ["mine"]
    pins.remove_filter(TESS, "nightly")
    with pytest.raises(NotFound):
        pins.remove_filter(TESS, "nightly")
    for name, page, query, field in (
            (" lead", "runs", {}, "filter"), ("x" * 65, "runs", {}, "filter"),
            ("ok", "audit", {}, "page"), ("ok", "runs", {"Bad": "x"}, "query.Bad"),
            ("ok", "runs", {"status": "a\nb"}, "query.status")):
        with pytest.raises(InvalidInput) as refused:
            pins.save_filter(TESS, name, page, query)
        assert refused.value.field == field
