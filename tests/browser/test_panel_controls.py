"""The controls over projects, tasks and triggers (issue 23, item 1), in a real browser against
`ql serve --http`: each asks beside itself before it acts (No sends nothing; Yes has the
focus, so Enter confirms), and a refusal shows the API's problem next to the control. Tasks
are disabled, enabled and deleted from the tasks page; triggers from their page, with pause
and its reason shown with the state; projects are paused with a reason, resumed, archived
and unarchived; a backfill shows what its window admits, then its progress as it admits; a
viewer sees none of these controls, an operator none of an admin's."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from selenium.webdriver.common.keys import Keys

from tests.browser.panel_support import Panel, Site, publish_shell_task

pytestmark = pytest.mark.slow


def get(site: Site, path: str) -> dict[str, object]:
    shown = site.http.ok("GET", "/api/v1" + path, site.admin)
    assert isinstance(shown, dict)
    return shown


def publish_trigger(site: Site, project: str, trigger: str, task: str,
                    cron: str = "0 3 * * *") -> None:
    site.http.ok("POST", f"/api/v1/projects/{project}/triggers/{trigger}/revisions", site.admin,
                 {"task": task, "cron": cron, "timezone": "UTC"}, (200, 201))


def confirm(panel: Panel, selector: str, what: str) -> None:
    """Click the control, then confirm with Enter on the focused Yes."""
    panel.click(selector, what)
    panel.until(lambda d: panel.css(".confirm .confirm-yes"), f"the confirmation of {what}")
    active = panel.d.switch_to.active_element
    assert "confirm-yes" in (active.get_attribute("class") or ""), "Yes has the focus"
    active.send_keys(Keys.ENTER)


def test_tasks_are_disabled_enabled_and_deleted_after_a_confirmation(panel: Panel,
                                                                     site: Site) -> None:
    publish_shell_task(site, "ctk", "used", "true")
    publish_shell_task(site, "ctk", "spare", "true")
    publish_trigger(site, "ctk", "daily", "used")
    panel.login("operator")
    panel.open("/tasks", "tasks")
    disable = 'button[data-action="disable"][data-task="ctk/spare"]'
    panel.click(disable, "Disable")
    panel.until(lambda d: panel.css(".confirm"), "the confirmation")
    assert "Disable ctk/spare?" in panel.text("tasks")
    panel.shot("confirm-disable")
    panel.click(".confirm .confirm-no", "No")  # nothing is sent
    assert not panel.css(".confirm")
    assert get(site, "/projects/ctk/tasks/spare")["enabled"] is True
    confirm(panel, disable, "Disable")
    panel.until(lambda d: "Disabled ctk/spare." in panel.text("tasks-result"), "disabled")
    assert get(site, "/projects/ctk/tasks/spare")["enabled"] is False
    confirm(panel, 'button[data-action="enable"][data-task="ctk/spare"]', "Enable")
    panel.until(lambda d: "Enabled ctk/spare." in panel.text("tasks-result"), "enabled")
    assert get(site, "/projects/ctk/tasks/spare")["enabled"] is True
    assert panel.shown('#tasks button[data-action="delete"]') == 0  # an admin's

    panel.login("admin")
    panel.open("/tasks", "tasks")
    # refused while a trigger uses it: the API's problem beside the control
    confirm(panel, 'button[data-action="delete"][data-task="ctk/used"]', "Delete")
    panel.until(lambda d: panel.css('#tasks tr[data-task="ctk/used"] .row-result .problem'),
                "the refusal next to the control")
    problem = panel.css('#tasks tr[data-task="ctk/used"] .row-result')[0].text
    assert "daily" in problem, problem
    assert get(site, "/projects/ctk/tasks/used")["deleted"] is False
    panel.shot("delete-refused")
    confirm(panel, 'button[data-action="delete"][data-task="ctk/spare"]', "Delete")
    panel.until(lambda d: "Deleted ctk/spare." in panel.text("tasks-result"), "deleted")
    panel.until(lambda d: not panel.css('#tasks tr[data-task="ctk/spare"]'), "the row gone")
    assert get(site, "/projects/ctk/tasks/spare")["deleted"] is True
    # the trigger list: its trigger deleted, the task that it used can go too
    confirm(panel, 'button[data-action="delete"][data-trigger="ctk/daily"]', "Delete trigger")
    panel.until(lambda d: "Deleted ctk/daily." in panel.text("tasks-result"), "trigger deleted")
    assert get(site, "/projects/ctk/triggers/daily")["state"] == "deleted"
    confirm(panel, 'button[data-action="delete"][data-task="ctk/used"]', "Delete")
    panel.until(lambda d: "Deleted ctk/used." in panel.text("tasks-result"), "deleted")


def test_a_trigger_is_disabled_enabled_paused_and_deleted_from_its_page(panel: Panel,
                                                                        site: Site) -> None:
    publish_shell_task(site, "ctr", "job", "true")
    publish_trigger(site, "ctr", "night", "job")
    panel.login("operator")
    panel.open("/triggers/ctr/night", "trigger")
    panel.until(lambda d: panel.by_id("trigger-switch").text == "Disable", "the switch")
    assert not panel.by_id("trigger-delete").is_displayed()  # an admin's
    confirm(panel, "#trigger-switch", "Disable")
    panel.until(lambda d: "Disabled." in panel.text("trigger-action-result")
                and panel.by_id("trigger-switch").text == "Enable", "disabled")
    assert get(site, "/projects/ctr/triggers/night")["state"] == "disabled"
    confirm(panel, "#trigger-switch", "Enable")
    panel.until(lambda d: panel.by_id("trigger-switch").text == "Disable", "enabled")
    assert get(site, "/projects/ctr/triggers/night")["state"] == "firing"
    # pause with a reason: the reason is shown with the state
    panel.fill("pause-reason", "db upgrade")
    panel.by_id("trigger-pause").click()
    panel.until(lambda d: "paused (db upgrade)" in panel.text("trigger-details"), "paused")
    panel.shot("paused-with-reason")
    panel.by_id("trigger-resume").click()
    panel.until(lambda d: "firing" in panel.text("trigger-details"), "resumed")

    panel.login("admin")
    panel.open("/triggers/ctr/night", "trigger")
    panel.until(lambda d: panel.by_id("trigger-delete").is_displayed(), "Delete")
    confirm(panel, "#trigger-delete", "Delete")
    panel.until(lambda d: "deleted" in panel.text("trigger-details"), "deleted")
    assert get(site, "/projects/ctr/triggers/night")["state"] == "deleted"
    assert not panel.by_id("trigger-delete").is_displayed()


def test_a_project_is_paused_with_a_reason_resumed_archived_and_unarchived(
        panel: Panel, site: Site) -> None:
    publish_shell_task(site, "arc", "job", "true")
    publish_trigger(site, "arc", "one", "job")
    publish_trigger(site, "arc", "two", "job", "0 4 * * *")
    row = '#projects tr[data-project-row="arc"]'
    panel.login("operator")
    panel.open("/tasks", "tasks")
    panel.until(lambda d: panel.css(row), "the project's row")
    assert panel.shown(f'{row} button[data-action="archive"]') == 0  # an admin's
    panel.fill("project-reason-arc", "freeze")
    confirm(panel, 'button[data-action="pause"][data-project="arc"]', "Pause")
    panel.until(lambda d: "2 of 2 (freeze)" in panel.css(row)[0].text, "paused")
    assert get(site, "/projects/arc/triggers/one")["pause"]["reason"] == "freeze"  # type: ignore[index]
    panel.shot("project-paused")
    panel.open("/triggers/arc/two", "trigger")
    panel.until(lambda d: "paused (freeze)" in panel.text("trigger-details"), "its reason")
    panel.open("/tasks", "tasks")
    confirm(panel, 'button[data-action="resume"][data-project="arc"]', "Resume")
    panel.until(lambda d: "none of 2" in panel.css(row)[0].text, "resumed")
    assert get(site, "/projects/arc/triggers/one")["state"] == "firing"

    panel.login("admin")
    panel.open("/tasks", "tasks")
    confirm(panel, 'button[data-action="archive"][data-project="arc"]', "Archive")
    panel.until(lambda d: "archived" in panel.css(row)[0].text, "archived")
    assert get(site, "/projects/arc")["status"] == "archived"
    assert get(site, "/projects/arc/triggers/one")["state"] == "archived"
    confirm(panel, 'button[data-action="unarchive"][data-project="arc"]', "Unarchive")
    panel.until(lambda d: "Unarchived arc." in panel.text("tasks-result"), "unarchived")
    assert get(site, "/projects/arc")["status"] == "active"


def parked_task(site: Site, project: str, task: str) -> None:
    """A task whose Runs wait, queued, for a worker label no process offers: a backfill's
    Runs are admitted and never run."""
    site.http.ok("POST", "/api/v1/projects", site.admin, {"id": project}, (201, 409))
    site.http.ok("POST", f"/api/v1/projects/{project}/tasks/{task}/revisions", site.admin,
                 {"command": {"kind": "shell", "command": "true"}, "requires": ["parked"]},
                 (200, 201))


def _backfilled(site: Site) -> list[dict[str, object]]:
    """Project bfl's backfilled Runs (its trigger also fires every minute while the test runs,
    as any trigger does on the server)."""
    runs = site.http.ok("GET", "/api/v1/runs?project=bfl&limit=1000", site.admin)["items"]
    return [r for r in runs if r["trigger_type"] == "backfill"]


def test_a_backfill_shows_its_window_then_its_progress(panel: Panel, site: Site) -> None:
    parked_task(site, "bfl", "job")
    publish_trigger(site, "bfl", "minutely", "job", "* * * * *")
    panel.login("operator")
    panel.open("/triggers/bfl/minutely", "trigger")
    panel.until(lambda d: "* * * * *" in panel.text("trigger-details"), "the details")
    assert panel.by_id("backfill-run").get_attribute("disabled") is not None
    # instants, not durations ago: planning the same window again a minute later must find
    # the same occurrences (a window of durations ago moves with the clock)
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    panel.fill("backfill-from", (now - timedelta(minutes=70)).isoformat())
    panel.fill("backfill-to", (now - timedelta(minutes=5)).isoformat())
    panel.by_id("backfill-plan-button").click()
    panel.until(lambda d: panel.by_id("backfill-result").get_attribute("data-to-admit"),
                "what the window admits")
    total = int(panel.by_id("backfill-result").get_attribute("data-to-admit") or 0)
    assert 64 <= total <= 66, total
    assert f"{total} to admit" in panel.text("backfill-result")
    rows = panel.rows("backfill-plan")
    assert len(rows) == 51 and rows[-1] == [f"… and {total - 50} more."], rows[-1]
    assert rows[0][3].endswith(" UTC")
    assert not _backfilled(site)  # the plan admits nothing (the live schedule may, each minute)
    panel.shot("backfill-window")

    confirm(panel, "#backfill-run", "Backfill")
    panel.until(lambda d: panel.by_id("backfill-result").get_attribute("data-state"),
                "the backfill's end", timeout=60)
    assert panel.by_id("backfill-result").get_attribute("data-state") == "done"
    assert f"Done: {total} admitted, 0 already had a Run" in panel.text("backfill-result")
    # its progress, request by request: 20 occurrences at a time, counted up to the total
    steps = panel.read(lambda: [int(li.get_attribute("data-done") or 0)
                                for li in panel.css("#backfill-log li")])
    assert steps == [min(total, 20 * n) for n in range(1, math.ceil(total / 20) + 1)], steps
    assert panel.by_id("backfill-progress").get_attribute("value") == str(total)
    assert f"{total} admitted" in panel.text("backfill-count")
    panel.shot("backfill-done")
    runs = _backfilled(site)
    assert len(runs) == total, runs[:2]
    # the same window again admits nothing
    panel.by_id("backfill-plan-button").click()
    panel.until(lambda d: "0 to admit" in panel.text("backfill-result"), "nothing left")
    assert panel.by_id("backfill-run").get_attribute("disabled") is not None
    # a window that is not the trigger's past: the API's problem beside the form
    panel.fill("backfill-to", "2099-01-01T00:00:00Z")
    panel.by_id("backfill-plan-button").click()
    panel.until(lambda d: panel.css("#backfill-result .problem"), "the refusal")


def test_a_backfill_stopped_midway_carries_on_when_asked_again(panel: Panel,
                                                               site: Site) -> None:
    parked_task(site, "bfs", "job")
    publish_trigger(site, "bfs", "minutely", "job", "* * * * *")
    panel.login("operator")
    panel.open("/triggers/bfs/minutely", "trigger")
    panel.fill("backfill-from", "10h")
    panel.fill("backfill-to", "5m")
    panel.by_id("backfill-plan-button").click()
    panel.until(lambda d: panel.by_id("backfill-result").get_attribute("data-to-admit"),
                "what the window admits")
    total = int(panel.by_id("backfill-result").get_attribute("data-to-admit") or 0)
    assert total >= 590, total
    confirm(panel, "#backfill-run", "Backfill")
    panel.until(lambda d: int(panel.by_id("backfill-count").get_attribute("data-done") or 0)
                >= 20, "the first request's progress")
    panel.by_id("backfill-stop").click()
    panel.until(lambda d: panel.by_id("backfill-result").get_attribute("data-state"),
                "the backfill's end", timeout=60)
    assert panel.by_id("backfill-result").get_attribute("data-state") == "interrupted"
    done = int(panel.by_id("backfill-count").get_attribute("data-done") or 0)
    assert 20 <= done < total, (done, total)
    assert "Backfill the same window again to carry on" in panel.text("backfill-result")
    assert panel.by_id("backfill-run").get_attribute("disabled") is not None
    panel.shot("backfill-stopped")
    # asked again, the window admits only what is left
    panel.by_id("backfill-plan-button").click()
    panel.until(lambda d: int(panel.by_id("backfill-result").get_attribute("data-to-admit")
                              or -1) < total, "the rest")
    left = int(panel.by_id("backfill-result").get_attribute("data-to-admit") or 0)
    assert total - done - 1 <= left <= total - done + 1, (left, total, done)  # a minute passed


def test_a_viewer_sees_no_write_control_and_an_operator_no_admin_one(panel: Panel,
                                                                      site: Site) -> None:
    publish_shell_task(site, "vwr", "job", "true")
    publish_trigger(site, "vwr", "daily", "job")
    panel.login("viewer")
    panel.open("/tasks", "tasks")
    panel.until(lambda d: panel.css('#tasks tr[data-task="vwr/job"]')
                and panel.css('#projects tr[data-project-row="vwr"]'), "the lists")
    assert panel.shown("#projects button, #projects input, #tasks button:not([data-pin]), "
                       "#trigger-list button:not([data-pin])") == 0  # (a pin is the user's own)
    assert "firing" in panel.css('#trigger-list tr[data-trigger-row="vwr/daily"]')[0].text
    assert not panel.read(lambda: [a for a in panel.css("#tasks a") if a.text == "Edit"])
    assert panel.shown('main a[href="/tasks/edit"]') == 0
    panel.open("/triggers/vwr/daily", "trigger")
    panel.until(lambda d: "0 3 * * *" in panel.text("trigger-details"), "the details")
    for control in ("trigger-fire", "trigger-switch", "trigger-delete", "trigger-edit",
                    "pause-form", "backfill"):
        assert not panel.by_id(control).is_displayed(), control
    assert panel.shown("main button:not([data-pin]), main input") == 0
    panel.open("/tasks/edit?project=vwr&task=job", "task-editor")
    panel.until(lambda d: panel.by_id("task-command").get_attribute("value") == "true", "loaded")
    assert not panel.by_id("task-publish").is_displayed()
    panel.open("/triggers/edit?project=vwr&trigger=daily", "trigger-editor")
    panel.until(lambda d: panel.by_id("trigger-cron").get_attribute("value") == "0 3 * * *",
                "loaded")
    assert not panel.by_id("trigger-publish").is_displayed()

    panel.login("operator")
    panel.open("/tasks", "tasks")
    panel.until(lambda d: panel.css('#tasks button[data-action="disable"]')
                and panel.css('#trigger-list button[data-action="disable"]'), "the controls")
    assert panel.shown('button[data-action="delete"], button[data-action="archive"]') == 0
    assert not panel.read(lambda: [a for a in panel.css("#tasks a") if a.text == "Edit"])
    panel.open("/triggers/vwr/daily", "trigger")
    panel.until(lambda d: panel.by_id("trigger-switch").is_displayed(), "the switch")
    assert panel.by_id("backfill").is_displayed() and panel.by_id("pause-form").is_displayed()
    assert not panel.by_id("trigger-delete").is_displayed()
    assert not panel.by_id("trigger-edit").is_displayed()
