"""Task parameters in the panel (issue 21, item 3), in a real browser against `ql serve
--http`: a Run's page shows the value of each of its task's parameters, those a run now gave
and the defaults of the others."""

from __future__ import annotations

import pytest

from tests.browser.panel_support import Panel, Site

pytestmark = pytest.mark.slow


def test_a_runs_page_shows_its_parameter_values(panel: Panel, site: Site) -> None:
    site.http.ok("POST", "/api/v1/projects", site.admin, {"id": "params"}, (201, 409))
    site.http.ok("POST", "/api/v1/projects/params/tasks/greet/revisions", site.admin, {
        "command": {"kind": "shell", "command": "echo \"$who $count\""},
        "parameters": [{"name": "who", "default": "world"},
                       {"name": "count", "type": "integer", "default": 2}]}, 201)
    run = site.http.ok("POST", "/api/v1/projects/params/tasks/greet/run", site.admin,
                       {"request_id": "pp-1", "parameters": {"who": "panel <b>x</b>"}}, 201)
    panel.login("viewer")
    panel.open(f"/runs/{run['id']}", "run")
    panel.until(lambda d: panel.css("#run-details dt"), "the details")
    panel.until(lambda d: "Parameters" in panel.details("run-details"), "the parameters row")
    shown = panel.details("run-details")
    assert shown["Parameters"] == 'count=2, who="panel <b>x</b>"', shown
    assert not panel.css("#run-details b")  # a value is text, never markup
    panel.until(lambda d: panel.text("run-status") == "succeeded", "the Run to finish")
    panel.until(lambda d: "panel <b>x</b> 2" in panel.text("log"), "its output")
