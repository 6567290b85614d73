"""Labels, pins and saved filters in the panel (issue 23, item 1; organise.js), in a real
browser against `ql serve --http`: an operator edits a task's and a trigger's labels (chips
on the tasks page, the dashboard and the trigger's page; a bad label refused beside the
control) and filters by one; a pinned task and trigger come first, and stay first on the next
visit (a pinned trigger first on the dashboard's first page, wherever it would be otherwise); a Runs filter is saved under a name and applied again (another user does not see it);
a viewer sees the labels and may pin, but has no label editing control."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from tests.browser.panel_support import PASSWORD, Panel, Site, publish_shell_task
from tests.support.test_api_support import Auth

pytestmark = pytest.mark.slow

PROJECT = "org"


def world(site: Site) -> None:
    for task in ("alpha", "beta", "gamma"):
        publish_shell_task(site, PROJECT, task, "true")
    for trigger, task in (("a-nightly", "alpha"), ("b-hourly", "beta"), ("c-weekly", "gamma")):
        site.http.ok("POST", f"/api/v1/projects/{PROJECT}/triggers/{trigger}/revisions",
                     site.admin, {"task": task, "cron": "0 0 1 1 *", "timezone": "UTC"},
                     (200, 201))


def api(site: Site, path: str) -> object:
    return site.http.ok("GET", "/api/v1" + path, site.admin)


def chips(panel: Panel, row: str) -> list[str]:
    found = panel.d.execute_script(
        "var r = document.querySelector(arguments[0]);"
        "return r ? Array.prototype.map.call(r.querySelectorAll('.chip'),"
        " function (c) { return c.textContent; }) : null;", row)
    return [] if found is None else [str(c) for c in found]


def order(panel: Panel, table: str, attr: str) -> list[str]:
    found = panel.d.execute_script(
        "var attr = arguments[1];"
        "return Array.prototype.map.call(document.querySelectorAll(arguments[0]),"
        " function (r) { return r.getAttribute(attr); });",
        f"#{table} tbody tr[{attr}]", attr)
    assert isinstance(found, list)
    return [str(name) for name in found]


def edit_labels(panel: Panel, where: str, key: str, text: str) -> None:
    panel.click(f'{where} button[data-edit-labels="{key}"]', f"Labels of {key}")
    field = f'{where} form[data-labels-form="{key}"] input'
    panel.until(lambda d: panel.css(field), "the labels form")
    box = panel.css(field)[0]
    box.clear()
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


def set_label_filter(panel: Panel, label: str) -> None:
    box = panel.by_id("organise-label")
    box.clear()
    box.send_keys(label)
    box.send_keys(Keys.TAB)  # a change event


def test_an_operator_edits_labels_and_filters_by_one(panel: Panel, site: Site) -> None:
    world(site)
    panel.login("operator")
    panel.open("/tasks", "tasks")
    alpha = f'#tasks tr[data-task="{PROJECT}/alpha"]'
    edit_labels(panel, "#tasks", f"{PROJECT}/alpha", "team:payments, nightly")
    panel.until(lambda d: chips(panel, alpha) == ["nightly", "team:payments"], "the chips")
    shown = api(site, f"/projects/{PROJECT}/tasks/alpha")
    assert isinstance(shown, dict) and shown["labels"] == ["nightly", "team:payments"]
    assert shown["revision"] == 1  # nothing published
    # a bad label: the API's problem beside the control, nothing changed
    edit_labels(panel, "#tasks", f"{PROJECT}/beta", "Not A Label")
    beta = f'#tasks tr[data-task="{PROJECT}/beta"]'
    panel.until(lambda d: panel.css(f"{beta} .organise-result .problem"), "the refusal")
    assert "labels[0]" in panel.css(f"{beta} .organise-result .problem")[0].text
    panel.shot("bad-label")
    # filter the tasks by a label: the API is asked with ?label=
    set_label_filter(panel, "nightly")
    panel.until(lambda d: order(panel, "tasks", "data-task") == [f"{PROJECT}/alpha"],
                "only the labelled task")
    set_label_filter(panel, "")
    panel.until(lambda d: f"{PROJECT}/gamma" in order(panel, "tasks", "data-task"),
                "every task again")

    # a trigger's labels on its page, then the dashboard filtered by one
    panel.open(f"/triggers/{PROJECT}/b-hourly", "trigger")
    edit_labels(panel, "#organise-trigger", f"{PROJECT}/b-hourly", "nightly")
    panel.until(lambda d: chips(panel, "#organise-trigger") == ["nightly"], "the trigger's chip")
    panel.open("/", "dashboard")
    hourly = f'#triggers tr[data-trigger="{PROJECT}/b-hourly"]'
    panel.until(lambda d: chips(panel, hourly) == ["nightly"], "the chip on the dashboard")
    set_label_filter(panel, "nightly")
    panel.until(lambda d: order(panel, "triggers", "data-trigger") == [f"{PROJECT}/b-hourly"],
                "only the labelled trigger")
    panel.shot("dashboard-label")


def test_a_pinned_task_and_trigger_come_first(panel: Panel, site: Site) -> None:
    world(site)
    panel.login("viewer")
    panel.open("/tasks", "tasks")
    panel.until(lambda d: order(panel, "tasks", "data-task")[-1:] == [f"{PROJECT}/gamma"],
                "the tasks in order")
    panel.click(f'#tasks button[data-pin="{PROJECT}/gamma"]', "Pin gamma")
    panel.until(lambda d: order(panel, "tasks", "data-task")[0] == f"{PROJECT}/gamma",
                "the pinned task first")
    assert panel.css(f'#tasks button[data-pin="{PROJECT}/gamma"]')[0].text == "Unpin"
    panel.open("/", "dashboard")
    panel.click(f'#triggers button[data-pin="{PROJECT}/c-weekly"]', "Pin c-weekly")
    panel.until(lambda d: order(panel, "triggers", "data-trigger")[0] == f"{PROJECT}/c-weekly",
                "the pinned trigger first")
    pins = site.http.ok("GET", "/api/v1/me/pins", panel_user(site, "viewer"))
    assert [(p["kind"], p["id"]) for p in pins] == [("task", "gamma"), ("trigger", "c-weekly")]
    # the next visit: still first (the pins are stored, the dashboard asks nothing more)
    panel.open("/", "dashboard")
    panel.until(lambda d: order(panel, "triggers", "data-trigger")[:1] == [
        f"{PROJECT}/c-weekly"], "still first")
    panel.open("/tasks", "tasks")
    panel.until(lambda d: order(panel, "tasks", "data-task")[:1] == [f"{PROJECT}/gamma"],
                "the task still first")
    panel.click(f'#tasks button[data-pin="{PROJECT}/gamma"]', "Unpin gamma")
    panel.until(lambda d: order(panel, "tasks", "data-task")[-1:] == [f"{PROJECT}/gamma"],
                "back in its place")

    # across the dashboard's pages: a trigger that would be on page 2 comes first on page 1
    for n in range(25):
        site.http.ok("POST", f"/api/v1/projects/{PROJECT}/triggers/d-{n:02}/revisions",
                     site.admin, {"task": "alpha", "cron": "0 0 1 1 *", "timezone": "UTC"},
                     (200, 201))
    site.http.ok("PUT", f"/api/v1/me/pins/{PROJECT}/triggers/d-24", panel_user(site, "viewer"),
                 {}, (200, 201))
    panel.open("/", "dashboard")
    Select(panel.by_id("dash-limit")).select_by_value("25")
    first = [f"{PROJECT}/c-weekly", f"{PROJECT}/d-24", f"{PROJECT}/a-nightly"]

    def page_one(d: object) -> bool:  # 25 rows: drawn again after the page size changed
        shown = order(panel, "triggers", "data-trigger")
        return len(shown) == 25 and shown[:3] == first

    panel.until(page_one, "25 triggers, both pins first, on page 1")
    panel.click("#dash-next", "Next")
    panel.until(lambda d: panel.text("dash-page") == "Page 2", "page 2")
    panel.until(lambda d: order(panel, "triggers", "data-trigger") == [
        f"{PROJECT}/d-{n:02}" for n in range(21, 24)], "the rest, each once")
    panel.shot("pins-across-pages")


def panel_user(site: Site, name: str) -> Auth:
    return site.people.tokens[name]


def test_a_runs_filter_is_saved_and_applied(panel: Panel, site: Site) -> None:
    world(site)
    panel.login("operator")
    panel.open("/runs", "runs")
    Select(panel.by_id("filter-status")).select_by_visible_text("failed")
    panel.fill("filter-project", PROJECT)
    panel.click("#run-filter button[type=submit]", "Apply the filter")
    panel.click("#saved-filters summary", "Saved filters")
    panel.fill("saved-filter-name", "failed in org")
    panel.click("#saved-filter-save button[type=submit]", "Save")
    panel.until(lambda d: "Saved failed in org." in panel.text("saved-filter-result"), "saved")
    panel.open("/runs", "runs")
    assert panel.by_id("filter-status").get_attribute("value") == ""
    panel.click("#saved-filters summary", "Saved filters")
    panel.until(lambda d: panel.css('#saved-filter option[value="failed in org"]'),
                "the saved filter listed")
    panel.click("#saved-filter-apply", "Apply the saved filter")
    panel.until(lambda d: panel.by_id("filter-status").get_attribute("value") == "failed" and
                "status=failed" in d.current_url, "the filter applied")
    assert panel.by_id("filter-project").get_attribute("value") == PROJECT
    panel.shot("saved-filter")
    # another user has filters of their own
    panel.login("viewer")
    panel.open("/runs", "runs")
    panel.click("#saved-filters summary", "Saved filters")
    panel.until(lambda d: panel.by_id("saved-filters").get_attribute("data-loaded") == "0",
                "no saved filter of the viewer's")
    # deleted by its owner
    panel.login("operator")
    panel.open("/runs", "runs")
    panel.click("#saved-filters summary", "Saved filters")
    panel.until(lambda d: panel.css('#saved-filter option[value="failed in org"]'), "listed")
    panel.click("#saved-filter-delete", "Delete the saved filter")
    panel.until(lambda d: panel.by_id("saved-filters").get_attribute("data-loaded") == "0",
                "deleted")


def test_a_viewer_sees_labels_but_no_label_editing_control(panel: Panel, site: Site) -> None:
    world(site)
    site.http.ok("PUT", f"/api/v1/projects/{PROJECT}/tasks/beta/labels", site.admin,
                 {"labels": ["eu"]})
    panel.login("viewer")
    panel.open("/tasks", "tasks")
    beta = f'#tasks tr[data-task="{PROJECT}/beta"]'
    panel.until(lambda d: chips(panel, beta) == ["eu"], "the chip")
    assert panel.shown(f'#tasks button[data-pin="{PROJECT}/beta"]') == 1
    assert not panel.css("[data-edit-labels]")
    panel.open(f"/triggers/{PROJECT}/b-hourly", "trigger")
    panel.until(lambda d: panel.css("#organise-trigger button[data-pin]"), "the pin control")
    assert not panel.css("[data-edit-labels]")
    panel.open("/", "dashboard")
    panel.until(lambda d: panel.css("#triggers button[data-pin]"), "the dashboard's pins")
    assert not panel.css("[data-edit-labels]")


def test_an_operator_of_one_project_edits_labels_there_only(panel: Panel, site: Site) -> None:
    world(site)
    publish_shell_task(site, "elsewhere", "theirs", "true")
    site.http.ok("POST", "/api/v1/users", site.admin,
                 {"username": "opal", "role": "none", "password": PASSWORD}, (201, 409))
    site.http.ok("PUT", f"/api/v1/projects/{PROJECT}/grants/opal", site.admin,
                 {"role": "operator"})
    site.http.ok("PUT", "/api/v1/projects/elsewhere/grants/opal", site.admin,
                 {"role": "viewer"})
    panel.login("opal")
    panel.open("/tasks", "tasks")
    panel.until(lambda d: panel.css('#tasks tr[data-task="elsewhere/theirs"] button[data-pin]')
                and panel.css(f'#tasks tr[data-task="{PROJECT}/alpha"] button[data-pin]'),
                "both projects' tasks")
    assert panel.css(f'#tasks button[data-edit-labels="{PROJECT}/alpha"]')
    assert not panel.css('#tasks button[data-edit-labels="elsewhere/theirs"]')
    # the API refuses it too: a viewer of that project
    answer = site.http.call("PUT", "/api/v1/projects/elsewhere/tasks/theirs/labels",
                            auth=panel_token(site, "opal"), body={"labels": ["x"]})
    answer.problem(403, "QL_FORBIDDEN")


def panel_token(site: Site, username: str) -> Auth:
    made = site.http.ok("POST", "/api/v1/tokens", site.admin,
                        {"name": "organise", "scope": "operate", "username": username}, 201)
    return Auth(token=str(made["token"]), label=username)
