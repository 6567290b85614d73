"""Per-project roles in the panel (issue 23, item 3), in a real browser against `ql serve
--http`: a user with no role on every project and the operator role on one project sees that
project only, gets the operate controls on its trigger and none of an admin's, and an
operator of another project gets no write control there."""

from __future__ import annotations

import pytest

from tests.browser.panel_support import PASSWORD, Panel, Site, publish_shell_task

pytestmark = pytest.mark.slow


def _tenant(site: Site, username: str, project: str, role: str) -> None:
    site.http.ok("POST", "/api/v1/users", site.admin,
                 {"username": username, "role": "none", "password": PASSWORD}, (201, 409))
    site.http.ok("PUT", f"/api/v1/projects/{project}/grants/{username}", site.admin,
                 {"role": role})


def _switch(panel: Panel, select_id: str, value: str) -> None:
    """Choose another option of a select, as a click on it would (typing again within a second
    would extend the select's type-ahead instead)."""
    panel.d.execute_script(
        "var s = document.getElementById(arguments[0]); s.value = arguments[1];"
        " s.dispatchEvent(new Event('change'));", select_id, value)


def _trigger(site: Site, project: str) -> None:
    publish_shell_task(site, project, "quiet", "true")
    site.http.ok("POST", f"/api/v1/projects/{project}/triggers/daily/revisions", site.admin,
                 {"task": "quiet", "cron": "0 3 * * *", "timezone": "UTC"}, (200, 201))


def test_an_operator_of_one_project_operates_it_and_nothing_else(panel: Panel,
                                                                  site: Site) -> None:
    _trigger(site, "team-a")
    _trigger(site, "team-b")
    _tenant(site, "alice", "team-a", "operator")
    panel.login("alice")
    panel.open("/tasks", "tasks")
    panel.until(lambda d: panel.css('#tasks tr[data-task="team-a/quiet"]'), "team-a's task")
    assert not panel.css('#tasks tr[data-task="team-b/quiet"]')
    panel.open("/triggers/team-a/daily", "trigger")
    panel.until(lambda d: panel.by_id("trigger-fire").is_displayed(), "Fire now on team-a")
    assert panel.by_id("pause-form").is_displayed()
    assert not panel.by_id("trigger-delete").is_displayed()  # an admin's control
    assert not panel.by_id("trigger-edit").is_displayed()
    panel.open("/triggers/team-b/daily", "trigger")
    assert not panel.by_id("trigger-fire").is_displayed()
    assert not panel.by_id("pause-form").is_displayed()
    assert not panel.by_id("trigger-delete").is_displayed()


def test_a_viewer_of_a_project_gets_no_write_control_on_it(panel: Panel, site: Site) -> None:
    _trigger(site, "team-c")
    _tenant(site, "carol", "team-c", "viewer")
    panel.login("carol")
    panel.open("/triggers/team-c/daily", "trigger")
    panel.until(lambda d: "daily" in panel.text("main"), "the trigger")
    for control in ("trigger-fire", "pause-form", "trigger-delete", "trigger-edit"):
        assert not panel.by_id(control).is_displayed(), control


def test_a_project_admin_gets_the_write_forms_of_that_project_only(panel: Panel,
                                                                   site: Site) -> None:
    _trigger(site, "team-d")
    _trigger(site, "team-e")
    site.http.ok("POST", "/api/v1/users", site.admin,
                 {"username": "dave", "role": "viewer", "password": PASSWORD}, (201, 409))
    site.http.ok("PUT", "/api/v1/projects/team-d/grants/dave", site.admin, {"role": "admin"})
    panel.login("dave")
    panel.open("/environment", "environment")
    panel.choose("env-project", "team-d")
    panel.until(lambda d: panel.by_id("env-set").is_displayed(), "the form on team-d")
    _switch(panel, "env-project", "team-e")  # a viewer there: the form goes
    panel.until(lambda d: not panel.by_id("env-set").is_displayed(), "no form on team-e")
    _switch(panel, "env-project", "team-d")
    panel.until(lambda d: panel.by_id("env-set").is_displayed(), "the form back on team-d")
