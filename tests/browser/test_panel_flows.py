"""Flows in the panel (issue 21, item 1), in a real browser against `ql serve --http`: an
operator starts a flow from the Flows page, follows the link to the flow run, and the page
draws the graph as SVG -- a node per task coloured by its state, an edge per condition, each
run node linked to its Run -- live until the flow run ends; a Run's page links back to its
flow run; a viewer sees no Start button; names are text, never markup."""

from __future__ import annotations

import pytest

from tests.browser.panel_support import Panel, Site, publish_shell_task

pytestmark = pytest.mark.slow


def _publish(site: Site) -> None:
    publish_shell_task(site, "flows", "fetch", "echo fetch")
    publish_shell_task(site, "flows", "part", "echo part")
    publish_shell_task(site, "flows", "join", "exit 3")
    publish_shell_task(site, "flows", "alert", "echo alert")
    site.http.ok("POST", "/api/v1/projects/flows/flows/etl/revisions", site.admin, {
        "name": "ETL <b>bold</b>", "nodes": {
            "fetch": "fetch", "left": {"task": "part", "after": "fetch"},
            "right": {"task": "part", "after": "fetch"},
            "join": {"task": "join", "after": ["left", "right"]},
            "alert": {"task": "alert", "after": {"join": "failure"}},
            "cleanup": {"task": "alert", "after": {"join": "success"}}}}, (200, 201))


def test_an_operator_starts_a_flow_and_follows_its_graph(panel: Panel, site: Site) -> None:
    _publish(site)
    panel.login("operator")
    panel.open("/flows", "flows")
    panel.choose("flows-project", "flows")
    panel.until(lambda d: panel.css('#flows button[data-flow="etl"]'), "the Start button")
    assert [r[1] for r in panel.rows("flows")] == ["ETL <b>bold</b>"]
    assert not panel.css("#flows b")  # a name is text, never markup
    panel.css('#flows button[data-flow="etl"]')[0].click()
    link = panel.until(lambda d: panel.css("#start-result a"), "the started flow run's link")
    link[0].click()
    panel.ready("flow-run")
    panel.until(lambda d: panel.text("flow-run-status") == "failed", "the flow run to end",
                timeout=60)
    nodes = panel.read(lambda: {n.get_attribute("data-node"): n.get_attribute("data-state")
                                for n in panel.css("svg.flow g.flow-node")})
    assert nodes == {"fetch": "succeeded", "left": "succeeded", "right": "succeeded",
                     "join": "failed", "alert": "succeeded", "cleanup": "skipped"}, nodes
    edges = panel.read(lambda: sorted(str(e.get_attribute("data-edge"))
                                      for e in panel.css("svg.flow path.flow-edge")))
    assert edges == ["fetch>left", "fetch>right", "join>alert", "join>cleanup", "left>join",
                     "right>join"]
    assert len(panel.css("svg.flow path.flow-edge-failure")) == 1
    linked = panel.css('svg.flow a g[data-node="join"]')
    assert linked, "a node that ran links to its Run"
    assert len(panel.css("svg.flow a")) == 5  # every node but the skipped one
    steps = {r[0]: r for r in panel.rows("flow-steps")}
    assert steps["cleanup"][2] == "skipped" and steps["join"][4] == "failed"
    assert panel.by_id("flow-run-cancel").get_attribute("hidden") is not None
    panel.shot("flow-run")
    # the node's Run links back to its flow run
    flow_run_id = panel.d.current_url.rsplit("/", 1)[1]
    panel.css('#flow-steps tr[data-node="join"] a')[0].click()
    panel.ready("run")
    panel.until(lambda d: "Flow run" in panel.details("run-details"), "the flow run row")
    back = [a for a in panel.css("#run-details a") if "/flows/runs/" in str(
        a.get_attribute("href"))]
    assert back and str(back[0].get_attribute("href")).endswith(flow_run_id)


def test_a_viewer_sees_flows_but_cannot_start_one(panel: Panel, site: Site) -> None:
    _publish(site)
    panel.login("viewer")
    panel.open("/flows", "flows")
    panel.choose("flows-project", "flows")
    panel.until(lambda d: panel.rows("flows") and panel.rows("flows")[0][0] == "etl",
                "the flow listed")
    buttons = panel.css('#flows button[data-flow="etl"]')
    assert buttons and not buttons[0].is_displayed()


def test_a_trigger_that_starts_a_flow_shows_it_and_its_flow_runs_say_so(
        panel: Panel, site: Site) -> None:
    _publish(site)
    site.http.ok("POST", "/api/v1/projects/flows/triggers/tick/revisions", site.admin, {
        "flow": "etl", "schedule": "every 1s"}, (200, 201))
    site.http.ok("POST", "/api/v1/projects/flows/tasks/greet/revisions", site.admin, {
        "command": {"kind": "shell", "command": 'echo "$who"'},
        "parameters": [{"name": "who", "default": "world"}]}, (200, 201))
    site.http.ok("POST", "/api/v1/projects/flows/triggers/hello/revisions", site.admin, {
        "task": "greet", "schedule": "every 1h", "parameters": {"who": "zed"}}, (200, 201))
    panel.login("viewer")
    panel.open("/triggers/flows/tick", "trigger")
    panel.until(lambda d: "Starts flow" in panel.text("trigger-details"), "the flow row")
    assert "etl" in panel.text("trigger-details")
    panel.open("/triggers/flows/hello", "trigger")
    panel.until(lambda d: "who=zed" in panel.text("trigger-details"), "the trigger's values")
    panel.open("/flows", "flows")
    panel.choose("flows-project", "flows")
    panel.until(lambda d: any(r[4] == "trigger tick" for r in panel.rows("flow-runs")),
                "a flow run the trigger started", timeout=60)
    started = next(r for r in panel.rows("flow-runs") if r[4] == "trigger tick")
    started_link = [a for a in panel.css("#flow-runs a")
                    if a.text and started[0].startswith(a.text)]
    started_link[0].click()
    panel.ready("flow-run")
    panel.until(lambda d: "trigger tick" in panel.text("flow-run-details"), "who started it")
    assert "its occurrence of" in panel.text("flow-run-details")
