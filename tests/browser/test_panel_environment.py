"""A project's environment in the panel (issue 22, item 3), in a real browser against `ql
serve --http`: an admin sets a plain entry and sees it, its revision and its history; setting
a secret on a server without a key is refused with the reason (nothing is written, and the
typed value is not echoed anywhere on the page); an admin removes an entry after a
confirmation; a viewer reads the entries with no write control."""

from __future__ import annotations

import pytest

from tests.browser.panel_support import Panel, Site

pytestmark = pytest.mark.slow

SECRET = "s3cr3t-value-never-shown"


def _open(panel: Panel, project: str) -> None:
    panel.open("/environment", "environment")
    panel.choose("env-project", project)


def test_an_admin_sets_plain_values_and_a_secret_needs_the_key(panel: Panel, site: Site) -> None:
    site.http.ok("POST", "/api/v1/projects", site.admin, {"id": "envs"}, (201, 409))
    panel.login("admin")
    _open(panel, "envs")
    panel.until(lambda d: "No entry" in panel.text("env-revision"), "the empty environment")
    panel.fill("env-name", "REGION")
    panel.fill("env-value", "eu-west")
    panel.by_id("env-secret").click()  # plain: shown in the table
    panel.fill("env-description", "where <b>we</b> run")
    panel.by_id("env-save").click()
    panel.until(lambda d: "Set REGION: revision 1" in panel.text("env-result"), "the answer")
    panel.until(lambda d: panel.rows("env-entries") and panel.rows("env-entries")[0][0]
                == "REGION", "the entry")
    [entry] = panel.rows("env-entries")
    assert entry[1:4] == ["eu-west", "yes", "where <b>we</b> run"], entry
    assert not panel.css("#env-entries b")  # text, never markup
    assert panel.by_id("env-value").get_attribute("value") == ""  # sent once, not kept
    panel.until(lambda d: panel.rows("env-history"), "the history")
    assert panel.rows("env-history")[0][:3] == ["1", "set", "REGION"]
    # a secret on a server with no key: refused, nothing written, the value nowhere on the page
    panel.by_id("env-secret").click()
    panel.fill("env-name", "TOKEN")
    panel.fill("env-value", SECRET)
    panel.by_id("env-save").click()
    refused = panel.until(lambda d: panel.css("#env-result .problem"), "the refusal")
    assert "QL_SECRET_KEY" in refused[0].text and "secret key" in refused[0].text.lower()
    assert SECRET not in panel.d.execute_script("return document.body.innerText")
    shown = site.http.ok("GET", "/api/v1/projects/envs/environment", site.admin)
    assert [e["name"] for e in shown["entries"]] == ["REGION"] and shown["revision"] == 1
    panel.shot("environment")
    # removing asks first
    panel.click('#env-entries button[data-remove="REGION"]', "the Remove button")
    panel.d.switch_to.alert.accept()
    panel.until(lambda d: "Removed REGION" in panel.text("env-result"), "the removal")
    panel.until(lambda d: "No entry in" in panel.rows("env-entries")[0][0], "the empty table")


def test_a_viewer_reads_the_environment_with_no_write_control(panel: Panel, site: Site) -> None:
    site.http.ok("POST", "/api/v1/projects", site.admin, {"id": "envlook"}, (201, 409))
    site.http.ok("PUT", "/api/v1/projects/envlook/environment/REGION", site.admin,
                 {"value": "ap-east"}, (200, 201))
    panel.login("viewer")
    _open(panel, "envlook")
    panel.until(lambda d: panel.rows("env-entries") and panel.rows("env-entries")[0][0]
                == "REGION", "the entry")
    assert not panel.by_id("env-set").is_displayed()
    assert panel.css("#env-entries button") and panel.shown("#env-entries button") == 0
