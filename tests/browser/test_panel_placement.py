"""Placement in the panel (issue 21, item 2), in a real browser against `ql serve --http`: the
tasks page says which workers run each task, a Run no live executor can take says what it
requires and why it waits, the dashboard's queue shows the queued Runs by required labels
(marking the sets no live worker offers), and the processes table shows what each process
offers; the task editor loads, changes, keeps and clears requirements and limits.

The site's `ql serve` offers no labels, so a task that requires `region=us` is admitted by run
now and then waits, queued, however long the page is watched."""

from __future__ import annotations

import pytest

from tests.browser.panel_support import Panel, Site, publish_shell_task

pytestmark = pytest.mark.slow


def test_a_task_with_requirements_and_its_waiting_run(panel: Panel, site: Site) -> None:
    publish_shell_task(site, "place", "anywhere", "true")
    site.http.ok("POST", "/api/v1/projects", site.admin, {"id": "place"}, (201, 409))
    site.http.ok("POST", "/api/v1/projects/place/tasks/us-only/revisions", site.admin,
                 {"command": {"kind": "shell", "command": "true"},
                  "requires": ["region=us", "gpu"]}, 201)
    run = site.http.ok("POST", "/api/v1/projects/place/tasks/us-only/run", site.admin,
                       {"request_id": "place-1"}, 201)
    panel.login("viewer")
    panel.open("/tasks", "tasks")
    panel.until(lambda d: panel.css('#tasks tr[data-task="place/us-only"]'), "the task's row")
    by_task = {row[1]: row for row in panel.rows("tasks") if row[0] == "place"}
    assert by_task["us-only"][7] == "gpu, region=us"
    assert by_task["anywhere"][7] == "any worker"

    panel.open(f"/runs/{run['id']}", "run")
    panel.until(lambda d: "Waiting" in panel.text("run-details"), "the placement rows")
    shown = panel.details("run-details")
    assert shown["Requires"] == "gpu, region=us", shown
    assert shown["Waiting"] == ("no live worker offers gpu, region=us: it stays queued until "
                                "a worker with these labels is running"), shown
    assert panel.text("run-status") == "queued"
    panel.shot("waiting-run")

    panel.open("/", "dashboard")
    panel.until(lambda d: [r for r in panel.rows("processes") if r[0] == "serve"],
                "the serve process")
    [serve] = [row for row in panel.rows("processes") if row[0] == "serve"]
    assert serve[4] == "—"  # it was started without --labels
    panel.until(lambda d: panel.css('#queue tr[data-requires="gpu,region=us"]'), "the queue")
    [waiting] = [r for r in panel.rows("queue") if r[0] == "gpu, region=us"]
    assert (waiting[1], waiting[3]) == ("1", "no"), waiting
    assert "wait for labels no live worker offers" in panel.text("queue-summary")


def test_the_task_editor_loads_and_changes_requirements_and_limits(panel: Panel,
                                                                   site: Site) -> None:
    site.http.ok("POST", "/api/v1/projects", site.admin, {"id": "place"}, (201, 409))
    path = "/api/v1/projects/place/tasks/edited"
    site.http.ok("POST", path + "/revisions", site.admin,
                 {"command": {"kind": "shell", "command": "true"},
                  "requires": ["gpu"], "memory_limit_bytes": 64 * 1024**2}, 201)
    panel.login("admin")
    panel.open("/tasks/edit?project=place&task=edited", "task-editor")
    panel.until(lambda d: panel.by_id("task-requires").get_attribute("value") == "gpu",
                "the loaded requirements")
    assert panel.by_id("task-memory").get_attribute("value") == "64M"
    assert panel.by_id("task-cpu").get_attribute("value") == ""
    panel.fill("task-cpu", "1m")
    panel.by_id("task-publish").click()
    panel.until(lambda d: "Published revision 2" in panel.text("task-result"), "the publish")
    shown = site.http.ok("GET", path, site.admin)
    assert (shown["requires"], shown["memory_limit_bytes"], shown["cpu_limit_s"]) == (
        ["gpu"], 64 * 1024**2, 60)  # what was not touched is kept
    panel.fill("task-requires", "")
    panel.fill("task-memory", "")
    panel.by_id("task-publish").click()
    panel.until(lambda d: "Published revision 3" in panel.text("task-result"), "the publish")
    shown = site.http.ok("GET", path, site.admin)
    assert (shown["requires"], shown["memory_limit_bytes"], shown["cpu_limit_s"]) == (
        [], None, 60)
    panel.fill("task-cpu", "1.5s")
    panel.by_id("task-publish").click()
    panel.until(lambda d: "whole seconds" in panel.text("task-result"), "the refusal")
    assert site.http.ok("GET", path, site.admin)["revision"] == 3
