"""Labels, pins and saved filters over HTTP (issue 23, item 1), on SQLite and on every
PostgreSQL server (the API as `ql web` serves it, as ql_web):

- an operator of the project sets and clears a task's or trigger's labels (a viewer may not;
  an operator of another project is refused as for any route of that project); a bad label
  is a problem naming it; nothing is published; the change is in the audit log;
- ``?label=`` keeps the labelled tasks, triggers and summary rows;
- pins and saved filters are each user's own; a tenant cannot pin (or learn of) another
  project's task, and a pin of a project no longer readable is hidden.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.stores import Stores
from qinglong.testing import FakeClock
from qinglong.web.backend import WebBackend
from qinglong.web.server import serve_api
from tests.contract.conftest import Backend
from tests.support.test_api_support import Auth, Http

PASSWORD = "correct horse battery staple"
DEMO = "/api/v1/projects/demo"


@dataclass
class Site:
    http: Http
    backend: WebBackend
    auth: dict[str, Auth]  # by user name: a token of each


def _publish(stores: Stores, project: str, task: str, trigger: str) -> None:
    stores.definitions.task_publish(TaskPublishParams(
        project_id=project, task_id=task, name=task,
        spec=CommandSpec(command=ShellCommand(command="true"))))
    stores.definitions.trigger_publish(TriggerPublishParams(
        project_id=project, trigger_id=trigger, task_id=task, expression="0 0 1 1 *",
        timezone="UTC"))


@pytest.fixture
def site(web_demo: Stores) -> Iterator[Site]:
    """demo (task job, trigger nightly-job; task spare, trigger spare-t) and other (task
    theirs, trigger theirs-t); root (admin), ann (operator), vic (viewer) on every project;
    team (an operator of demo only)."""
    _publish(web_demo, "demo", "job", "nightly-job")
    _publish(web_demo, "demo", "spare", "spare-t")
    web_demo.definitions.project_create(ProjectCreateParams(project_id="other"))
    _publish(web_demo, "other", "theirs", "theirs-t")
    clock = FakeClock(1_800_000_000_000)
    backend = WebBackend(stores=web_demo, clock=clock)
    auth = {}
    for name, role in (("root", "admin"), ("ann", "operator"), ("vic", "viewer"),
                       ("team", "none")):
        backend.accounts.user_create(name, role, PASSWORD)
    backend.grants.put("team", "demo", "operator", "root")
    for name, scope in (("root", "admin"), ("ann", "operate"), ("vic", "read"),
                        ("team", "operate")):
        made = backend.accounts.token_create(name, name="t", scope=scope, lifetime_ms=None)
        auth[name] = Auth(token=made.token, label=name)
    running = serve_api(backend, clock, "127.0.0.1:0")
    try:
        yield Site(Http(running.port), backend, auth)
    finally:
        running.stop()


def test_an_operator_labels_and_the_listings_filter_on_a_label(site: Site) -> None:
    http, ann = site.http, site.auth["ann"]
    before = http.ok("GET", f"{DEMO}/tasks/job", ann)
    put = http.ok("PUT", f"{DEMO}/tasks/job/labels", ann,
                  {"labels": ["team:payments", "nightly", "nightly"]})
    assert put == {"project": "demo", "kind": "task", "id": "job",
                   "labels": ["nightly", "team:payments"]}
    shown = http.ok("GET", f"{DEMO}/tasks/job", ann)
    assert shown["labels"] == ["nightly", "team:payments"]
    assert (shown["revision"], shown["content_digest"]) == (before["revision"],
                                                            before["content_digest"])
    http.ok("PUT", f"{DEMO}/triggers/nightly-job/labels", ann, {"labels": ["nightly"]})
    http.ok("PUT", "/api/v1/projects/other/triggers/theirs-t/labels", ann,
            {"labels": ["nightly"]})
    tasks = http.ok("GET", f"{DEMO}/tasks?label=nightly", ann)
    assert [(t["task"], t["labels"]) for t in tasks] == [("job", ["nightly", "team:payments"])]
    assert [t["task"] for t in http.ok("GET", f"{DEMO}/tasks", ann)] == ["job", "spare"]
    assert [t["trigger"] for t in http.ok("GET", "/api/v1/triggers?label=nightly", ann)] == [
        "nightly-job", "theirs-t"]
    assert [t["trigger"] for t in http.ok("GET", f"{DEMO}/triggers?label=nightly", ann)] == [
        "nightly-job"]
    assert http.ok("GET", f"{DEMO}/triggers/nightly-job", ann)["labels"] == ["nightly"]
    summary = http.ok("GET", "/api/v1/triggers/summary?label=nightly", ann)
    assert [(i["trigger"], i["labels"]) for i in summary["items"]] == [
        ("nightly-job", ["nightly"]), ("theirs-t", ["nightly"])]
    http.call("GET", "/api/v1/triggers?label=Not%20One", auth=ann).problem(422,
                                                                          "QL_INVALID_INPUT")
    cleared = http.ok("DELETE", f"{DEMO}/tasks/job/labels", ann)
    assert cleared["labels"] == [] and http.ok("GET", f"{DEMO}/tasks?label=nightly", ann) == []
    audit = http.ok("GET", "/api/v1/audit?action=task.label", site.auth["root"])
    assert [e["detail"]["labels"] for e in audit["items"]] == [[], ["nightly",
                                                                    "team:payments"]]


def test_a_bad_label_or_a_missing_target_is_a_problem_and_a_viewer_may_not_label(
        site: Site) -> None:
    http, ann, vic = site.http, site.auth["ann"], site.auth["vic"]
    body = http.call("PUT", f"{DEMO}/tasks/job/labels", auth=ann,
                     body={"labels": ["ok", "Has Space"]}).problem(422, "QL_INVALID_INPUT")
    assert body["field"] == "labels[1]" and "lowercase letters" in body["detail"]
    body = http.call("PUT", f"{DEMO}/tasks/job/labels", auth=ann,
                     body={"labels": ["x" * 49]}).problem(422, "QL_INVALID_INPUT")
    assert body["field"] == "labels[0]"
    http.call("PUT", f"{DEMO}/tasks/ghost/labels", auth=ann,
              body={"labels": ["x"]}).problem(404, "QL_NOT_FOUND")
    http.call("PUT", f"{DEMO}/tasks/job/labels", auth=vic,
              body={"labels": ["x"]}).problem(403, "QL_FORBIDDEN")
    http.call("DELETE", f"{DEMO}/triggers/nightly-job/labels", auth=vic).problem(
        403, "QL_FORBIDDEN")
    assert http.ok("GET", f"{DEMO}/tasks/job", vic)["labels"] == []


def test_a_tenant_labels_and_pins_only_in_its_project(site: Site) -> None:
    http, team = site.http, site.auth["team"]
    http.ok("PUT", f"{DEMO}/tasks/job/labels", team, {"labels": ["mine"]})
    for path in ("/api/v1/projects/other/tasks/theirs/labels",
                 "/api/v1/projects/ghost/tasks/theirs/labels"):
        http.call("PUT", path, auth=team, body={"labels": ["x"]}).problem(403, "QL_FORBIDDEN")
    # pinning a task of another project is refused alike whether or not the task or the
    # project exists: the answers differ only by the name the caller sent
    details = {http.call("PUT", path, auth=team, body={}).problem(403, "QL_FORBIDDEN")[
                   "detail"].replace(project, "PROJECT")
               for project, path in (("other", "/api/v1/me/pins/other/tasks/theirs"),
                                     ("other", "/api/v1/me/pins/other/tasks/ghost"),
                                     ("ghost", "/api/v1/me/pins/ghost/tasks/theirs"))}
    assert len(details) == 1, details
    http.ok("PUT", "/api/v1/me/pins/demo/tasks/job", team, {}, status=201)
    # the other project's labelled triggers are not shown to the tenant either
    http.ok("PUT", "/api/v1/projects/other/triggers/theirs-t/labels", site.auth["root"],
            {"labels": ["mine"]})
    http.ok("PUT", f"{DEMO}/triggers/spare-t/labels", team, {"labels": ["mine"]})
    assert [t["trigger"] for t in http.ok("GET", "/api/v1/triggers?label=mine", team)] == [
        "spare-t"]


def test_pins_are_each_users_own_and_come_back_in_pin_order(site: Site,
                                                            backend: Backend) -> None:
    http, ann, vic = site.http, site.auth["ann"], site.auth["vic"]
    pin = http.ok("PUT", "/api/v1/me/pins/demo/triggers/spare-t", vic, {}, status=201)
    assert (pin["project"], pin["kind"], pin["id"]) == ("demo", "trigger", "spare-t")
    backend.let_time_pass()
    http.ok("PUT", "/api/v1/me/pins/demo/tasks/job", vic, None, status=201)
    again = http.ok("PUT", "/api/v1/me/pins/demo/triggers/spare-t", vic, {}, status=200)
    assert again["pinned_at_ms"] == pin["pinned_at_ms"]
    assert [(p["kind"], p["id"]) for p in http.ok("GET", "/api/v1/me/pins", vic)] == [
        ("trigger", "spare-t"), ("task", "job")]
    assert http.ok("GET", "/api/v1/me/pins", ann) == []
    # the listings say which are the caller's pins
    assert "pinned" not in http.ok("GET", "/api/v1/triggers", vic)[0]  # only when asked
    assert {t["trigger"]: t["pinned"] for t in http.ok("GET", "/api/v1/triggers?pins=true",
                                                       vic)} == {
        "nightly-job": False, "spare-t": True, "theirs-t": False}
    assert not any(t["pinned"] for t in http.ok("GET", "/api/v1/triggers?pins=1", ann))
    assert {t["task"]: t["pinned"] for t in http.ok("GET", f"{DEMO}/tasks?pins=true", vic)} == {
        "job": True, "spare": False}
    summary = http.ok("GET", "/api/v1/triggers/summary?project=demo&pins=true", vic)
    assert [(i["trigger"], i["pinned"]) for i in summary["items"]] == [
        ("nightly-job", False), ("spare-t", True)]
    assert http.ok("GET", f"{DEMO}/triggers/spare-t?pins=true", vic)["pinned"] is True
    http.call("PUT", "/api/v1/me/pins/demo/tasks/ghost", auth=vic, body={}).problem(
        404, "QL_NOT_FOUND")
    assert http.call("DELETE", "/api/v1/me/pins/demo/tasks/job", auth=vic).status == 204
    http.call("DELETE", "/api/v1/me/pins/demo/tasks/job", auth=vic).problem(404, "QL_NOT_FOUND")
    http.call("DELETE", "/api/v1/me/pins/demo/triggers/spare-t", auth=ann).problem(
        404, "QL_NOT_FOUND")
    # a grant taken back hides the pins of its project
    team = site.auth["team"]
    http.ok("PUT", "/api/v1/me/pins/demo/tasks/spare", team, {}, status=201)
    site.backend.grants.remove("team", "demo")
    assert http.ok("GET", "/api/v1/me/pins", team) == []


def test_saved_filters_are_each_users_own(site: Site) -> None:
    http, ann, vic = site.http, site.auth["ann"], site.auth["vic"]
    saved = http.ok("PUT", "/api/v1/me/filters/failed%20in%20demo", vic,
                    {"page": "runs", "query": {"status": "failed", "project": "demo"}})
    assert (saved["name"], saved["page"], saved["query"]) == (
        "failed in demo", "runs", {"project": "demo", "status": "failed"})
    http.ok("PUT", "/api/v1/me/filters/nightly", vic, {"page": "dashboard",
                                                        "query": {"label": "nightly"}})
    http.ok("PUT", "/api/v1/me/filters/failed%20in%20demo", vic,
            {"page": "runs", "query": {"status": "lost"}})
    assert [(f["name"], f["query"]) for f in http.ok("GET", "/api/v1/me/filters", vic)] == [
        ("failed in demo", {"status": "lost"}), ("nightly", {"label": "nightly"})]
    assert [f["name"] for f in http.ok("GET", "/api/v1/me/filters?page=dashboard", vic)] == [
        "nightly"]
    assert http.ok("GET", "/api/v1/me/filters", ann) == []
    http.call("DELETE", "/api/v1/me/filters/nightly", auth=ann).problem(404, "QL_NOT_FOUND")
    assert http.call("DELETE", "/api/v1/me/filters/nightly", auth=vic).status == 204
    body = http.call("PUT", "/api/v1/me/filters/%20lead", auth=vic,
                     body={"page": "runs", "query": {}}).problem(422, "QL_INVALID_INPUT")
    assert body["field"] == "filter"
    body = http.call("PUT", "/api/v1/me/filters/x", auth=vic,
                     body={"page": "runs", "query": {"status": "a\u0007"}}).problem(422)
    assert body["field"] == "query.status"
