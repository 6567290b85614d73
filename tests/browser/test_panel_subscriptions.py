"""Git subscriptions in the panel (issue 22, item 2), in a real browser against `ql serve
--http`: an admin subscribes the project to a local bare repository with auto-tasks from the
Subscriptions page, an operator pulls it now and follows the link to the pull's Run, which
imports the scripts; the page then shows the commit and what the pull did; a viewer sees the
subscriptions and no control; names and URLs are text, never markup."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.panel_support import Panel, Site
from tests.contract.test_repo_pulls import Origin

pytestmark = pytest.mark.slow


def _open(panel: Panel, project: str) -> None:
    panel.open("/subscriptions", "subscriptions")
    panel.choose("repos-project", project)


def test_subscribe_pull_and_see_what_the_pull_did(panel: Panel, site: Site,
                                                  tmp_path: Path) -> None:
    origin = Origin(tmp_path)
    origin.commit({"jd_sign.py": "# cron: 15 8 * * *\nprint('sign')\n",
                   "README.md": "not a script\n"})
    site.http.ok("POST", "/api/v1/projects", site.admin, {"id": "subs"}, (201, 409))
    panel.login("admin")
    _open(panel, "subs")
    panel.until(lambda d: panel.rows("repos") and "No subscription" in panel.rows("repos")[0][0],
                "the empty list")
    panel.fill("repo-name", "jd")
    panel.fill("repo-url", str(origin.bare))
    panel.by_id("repo-auto-tasks").click()
    panel.by_id("repo-add-button").click()
    panel.until(lambda d: "Subscribed as jd" in panel.text("repo-result"), "the subscription")
    panel.click('#repos button[data-repo="jd"]', "its Pull button")
    link = panel.until(lambda d: panel.css("#repo-result a"), "the pull's Run link")
    run_id = str(link[0].get_attribute("href")).rsplit("/", 1)[1]
    shown = site.http.ok("GET", f"/api/v1/runs/{run_id}", site.admin)
    assert shown["run"]["task"] == "repo-jd", shown
    panel.until(lambda d: any("1 saved" in cell for r in panel.rows("repos") for cell in r),
                "the pull's report on the page", timeout=60)
    [row] = panel.rows("repos")
    assert row[0] == "jd" and row[2] == "main" and row[3] == "yes" and row[4] != "—", row
    assert "1 task made" in row[6], row
    scripts = site.http.ok("GET", "/api/v1/projects/subs/scripts", site.admin)
    assert [s["path"] for s in scripts] == ["jd/jd_sign.py"]
    panel.shot("subscriptions")


def test_a_viewer_sees_subscriptions_with_no_control(panel: Panel, site: Site,
                                                     tmp_path: Path) -> None:
    origin = Origin(tmp_path)
    origin.commit({"a.py": "print(1)\n"})
    site.http.ok("POST", "/api/v1/projects", site.admin, {"id": "look"}, (201, 409))
    site.http.ok("POST", "/api/v1/projects/look/repos", site.admin,
                 {"name": "b-repo", "url": str(origin.bare)}, (201,))
    panel.login("viewer")
    _open(panel, "look")
    panel.until(lambda d: panel.rows("repos") and panel.rows("repos")[0][0] == "b-repo",
                "the subscription listed")
    assert panel.css("#repos button") and panel.shown("#repos button") == 0
    assert not panel.by_id("repo-add").is_displayed()
