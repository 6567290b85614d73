"""The web panel in a real browser: Debian's headless chromium, driven by Selenium, against a
real `ql serve --http` on a temporary SQLite database.

It logs in (and is refused with a wrong password), publishes a task and a cron trigger through
the editors (watching the live cron preview), watches the trigger's Runs appear in the run
list, pages through Runs, checks the dashboard, the ledger and the stats chart, follows a Run's
log live on its page, cancels a running Run with the Cancel button, and checks what a viewer
may not do. The browser runs in Asia/Shanghai, so "your zone" and UTC differ.

Screenshots go to tests/browser/artifacts/ (git-ignored; QL_BROWSER_ARTIFACTS moves them); a
failed test also leaves its page, a screenshot and the browser console there.
"""

from __future__ import annotations

import itertools
import re
from urllib.parse import parse_qs, urlparse

import pytest
from selenium.webdriver.support.ui import Select

from tests.browser.panel_support import (
    VIEWER_ZONE,
    Panel,
    Site,
    publish_shell_task,
    utc_instant,
)
from tests.support.test_api_support import PASSWORD

pytestmark = pytest.mark.slow

SECRET_VALUE = "s3cret-value-never-shown-Kx9"
# the status of a live trigger's latest Run: any step on its way, none a failure
ON_ITS_WAY = re.compile(r"(succeeded|running|dispatching|queued)")


# --- the tests -------------------------------------------------------------------------------


def test_login_is_required_and_a_wrong_password_is_refused(panel: Panel, site: Site) -> None:
    # what a client that is not a browser gets: the API's answers, and public static files
    site.http.call("GET", "/").problem(401, "QL_UNAUTHENTICATED")
    page = site.http.call("GET", "/runs", headers={"Accept": "text/html"})
    assert page.status == 303 and page.headers["location"] == "/login?next=/runs", page
    script = site.http.call("GET", "/static/panel/panel.js")
    assert script.status == 200 and script.headers["content-type"].startswith("text/javascript")
    login_page = site.http.call("GET", "/login", headers={"Accept": "text/html"})
    assert "script-src 'self'" in login_page.headers["content-security-policy"]
    assert "<script src=\"/static/panel/panel.js?v=" in login_page.text

    panel.d.delete_all_cookies()
    panel.d.get(site.base + "/runs?status=failed")
    panel.ready("login")
    where = urlparse(panel.d.current_url)
    assert where.path == "/login" and parse_qs(where.query)["next"] == ["/runs?status=failed"]
    panel.fill("login-username", "admin")
    panel.fill("login-password", "not the password at all")
    panel.by_id("login-submit").click()
    panel.until(lambda d: panel.by_id("login-error").is_displayed(), "the login error")
    assert "wrong user name or password" in panel.text("login-error")
    assert panel.d.get_cookie("ql_session") is None
    assert urlparse(panel.d.current_url).path == "/login"
    panel.shot("refused")

    panel.fill("login-password", PASSWORD)
    panel.by_id("login-submit").click()
    panel.ready("runs")  # back where it was sent from, filter and all
    assert Select(panel.by_id("filter-status")).first_selected_option.text == "failed"
    assert panel.by_id("who").text == "admin"
    cookie = panel.d.get_cookie("ql_session")
    assert cookie is not None and cookie["httpOnly"] and cookie["secure"]


def test_publish_a_task_and_a_trigger_then_watch_its_runs(panel: Panel, site: Site) -> None:
    panel.login("admin")
    # the task editor: a shell task with a write-only environment entry and a hostile name
    panel.open("/tasks/edit", "task-editor")
    panel.fill("task-project", "web")
    panel.fill("task-id", "tick")
    panel.fill("task-name", "<b>tick</b><img src=x onerror=alert(1)>")
    panel.fill("task-command", 'echo "tick $QL_SCHEDULED_FOR_MS"; '
                               'if [ -n "$API_KEY" ]; then echo key-present; fi')
    panel.by_id("env-add").click()
    panel.css("#env-new .env-name")[0].send_keys("API_KEY")
    panel.css("#env-new .env-value")[0].send_keys(SECRET_VALUE)
    panel.by_id("task-publish").click()
    panel.until(lambda d: "Published revision 1 of web/tick" in panel.text("task-result"),
                "the task published")
    assert "API_KEY" in panel.text("env-existing") and "not shown" in panel.text("env-existing")
    assert SECRET_VALUE not in panel.d.page_source
    panel.shot("task-editor")

    panel.open("/tasks", "tasks")
    panel.until(lambda d: panel.css('#tasks tr[data-task="web/tick"]'), "the task's row")
    [row] = [r for r in panel.rows("tasks") if r[0] == "web"]
    assert "<b>tick</b><img src=x onerror=alert(1)>" in row[1]  # shown as text, not markup
    assert not panel.css("#tasks b") and not panel.css("#tasks img")
    assert row[5] == "API_KEY" and SECRET_VALUE not in panel.d.page_source
    # the editor loads a task (names of its environment, never values) and removes an entry
    panel.open("/tasks/edit?project=web&task=tick", "task-editor")
    panel.until(lambda d: panel.css("#env-existing .env-unset"), "the loaded task")
    assert "key-present" in (panel.by_id("task-command").get_attribute("value") or "")
    assert SECRET_VALUE not in panel.d.page_source
    panel.css("#env-existing .env-unset")[0].click()
    panel.by_id("task-publish").click()
    panel.until(lambda d: "Published revision 2 of web/tick" in panel.text("task-result"),
                "the second revision")
    assert panel.text("env-existing") == ""

    # the trigger editor, with its live preview
    panel.open("/triggers/edit?project=web&task=tick", "trigger-editor")
    assert panel.by_id("trigger-timezone").get_attribute("value") == VIEWER_ZONE
    panel.fill("trigger-id", "every3s")
    panel.until(lambda d: Select(panel.by_id("trigger-task")).first_selected_option.text ==
                "tick", "the task list")
    panel.fill("trigger-cron", "61 * * * *")
    panel.until(lambda d: panel.by_id("preview-state").get_attribute("class") == "problem",
                "the preview refusing a bad expression")
    assert "61" in panel.text("preview-state")
    panel.fill("trigger-timezone", "UTC")
    panel.fill("trigger-cron", "*/3 * * * * *")
    panel.until(lambda d: len(panel.rows("preview")) == 8, "eight previewed fires")
    instants = [utc_instant(r[3]) for r in panel.rows("preview")]
    assert all(t.second % 3 == 0 for t in instants), instants
    assert all((b - a).total_seconds() == 3 for a, b in itertools.pairwise(instants))
    assert "GMT+8" in panel.rows("preview")[0][2]  # the viewer's zone
    panel.shot("trigger-editor")
    panel.by_id("trigger-publish").click()
    panel.until(lambda d: "Published revision 1 of web/every3s" in panel.text("trigger-result"),
                "the trigger published")

    # its Runs appear in the run list, which follows new Runs by itself
    panel.open("/runs?project=web&trigger=every3s", "runs")
    panel.until(lambda d: panel.css('#runs tr[data-status="succeeded"]'), "a succeeded Run",
                timeout=25)
    first = panel.rows("runs")[0]
    assert first[1] == "web / tick" and first[2] == "web/every3s" and first[3] == "cron"
    panel.shot("runs")
    # the status filter
    Select(panel.by_id("filter-status")).select_by_visible_text("failed")
    panel.css("#run-filter button[type=submit]")[0].click()
    panel.until(lambda d: panel.rows("runs") == [["No Runs match."]], "no failed Runs")
    assert parse_qs(urlparse(panel.d.current_url).query)["status"] == ["failed"]

    # cursor pages: 26 more Runs of the task, 25 a page
    for n in range(26):
        site.http.ok("POST", "/api/v1/projects/web/tasks/tick/run", site.admin,
                     {"request_id": f"page-{n}"}, 201)
    panel.open("/runs?project=web&task=tick", "runs")
    panel.until(lambda d: len(panel.css("#runs tr[data-run]")) == 25, "a full first page")
    assert panel.by_id("page-prev").get_attribute("disabled") is not None
    # Page 1 follows new Runs (every3s adds one every 3 s): read its rows and click Next in
    # one script, so both belong to the same drawing of the page.
    page_one = set(panel.d.execute_script(
        "var ids = Array.from(document.querySelectorAll('#runs tr[data-run]'),"
        " function (r) { return r.getAttribute('data-run'); });"
        " document.getElementById('page-next').click(); return ids;"))
    assert len(page_one) == 25
    panel.until(lambda d: panel.text("page-label") == "Page 2", "page 2")
    page_two = panel.read(lambda: {r.get_attribute("data-run")
                                   for r in panel.css("#runs tr[data-run]")})
    assert page_two and not page_one & page_two
    panel.by_id("page-prev").click()
    panel.until(lambda d: panel.text("page-label") == "Page 1", "page 1 again")

    # the dashboard: the trigger, its next fire in the viewer's zone and UTC, its last Run
    panel.open("/", "dashboard")
    assert panel.text("viewer-zone") == VIEWER_ZONE
    panel.until(lambda d: any(r[0] == "web/every3s" and "%" in r[7] for r in
                              panel.rows("triggers")), "the trigger on the dashboard")
    [trigger] = [r for r in panel.rows("triggers") if r[0] == "web/every3s"]
    assert trigger[1] == "tick" and "*/3 * * * * *" in trigger[2] and trigger[3] == "firing"
    assert "GMT+8" in trigger[4]
    next_fire = utc_instant(trigger[5])
    assert next_fire.second % 3 == 0
    assert re.search(ON_ITS_WAY, trigger[6]), trigger
    assert re.fullmatch(r"\d+% of \d+", trigger[7]), trigger
    assert panel.rows("recent") and panel.text("process-summary").startswith("Profile sqlite")
    panel.shot("dashboard")

    # the trigger's page and its occurrence ledger
    panel.open("/triggers/web/every3s", "trigger")
    panel.until(lambda d: any(r[4] == "ran" for r in panel.rows("ledger")), "a ran occurrence")
    panel.until(lambda d: "*/3 * * * * *" in panel.text("trigger-details"), "the details")
    ran = next(r for r in panel.rows("ledger") if r[4] == "ran")
    assert re.search(ON_ITS_WAY, ran[5]), ran  # the newest occurrence's Run
    panel.shot("ledger")
    # Fire now admits a Run of the trigger outside its schedule and opens it
    panel.by_id("trigger-fire").click()
    panel.ready("run")
    panel.until(lambda d: "web/every3s" in panel.text("run-details"), "the fired Run")
    assert "manual" in panel.text("run-details")
    # the editor loads the trigger it edits
    panel.open("/triggers/edit?project=web&trigger=every3s", "trigger-editor")
    panel.until(lambda d: panel.by_id("trigger-cron").get_attribute("value") == "*/3 * * * * *",
                "the loaded trigger")
    assert panel.by_id("trigger-timezone").get_attribute("value") == "UTC"
    panel.until(lambda d: len(panel.rows("preview")) == 8, "its preview")

    # the per-day stats chart
    panel.open("/stats?project=web", "stats")
    panel.until(lambda d: panel.css("#stats-svg g.bar"), "the chart")
    bars = panel.read(lambda: [int(b.get_attribute("data-runs") or 0)
                               for b in panel.css("#stats-svg g.bar")])
    assert len(bars) == 7 and bars[-1] >= 27, bars  # today: 26 manual Runs and the trigger's
    assert panel.css('#stats-svg rect[data-series="successes"]')
    [tick] = [r for r in panel.rows("stats-totals") if r[0] == "tick"]
    assert int(tick[1]) >= 27
    panel.shot("stats")
    site.http.ok("POST", "/api/v1/projects/web/triggers/every3s/disable", site.admin, {})


def test_an_interval_trigger_with_jitter_paused_and_resumed_from_its_page(
        panel: Panel, site: Site) -> None:
    publish_shell_task(site, "ctl", "beat", "true")
    panel.login("admin")
    panel.open("/triggers/edit?project=ctl&task=beat", "trigger-editor")
    panel.fill("trigger-id", "beat")
    panel.until(lambda d: Select(panel.by_id("trigger-task")).first_selected_option.text ==
                "beat", "the task chosen")
    panel.fill("trigger-timezone", "UTC")
    # a DST policy on an expression that follows elapsed time is refused, naming the field
    panel.fill("trigger-cron", "*/5 * * * *")
    Select(panel.by_id("trigger-dst-overlap")).select_by_value("both")
    panel.by_id("trigger-publish").click()
    panel.until(lambda d: "dst-overlap" in panel.text("trigger-result"), "the refusal")
    assert site.http.call("GET", "/api/v1/projects/ctl/triggers/beat",
                          auth=site.admin).status == 404  # nothing was written
    Select(panel.by_id("trigger-dst-overlap")).select_by_value("")
    # an interval schedule with a bounded jitter; the preview follows the schedule text
    panel.fill("trigger-cron", "every 5s")
    panel.until(lambda d: len(panel.rows("preview")) == 8, "the interval's preview")
    panel.fill("trigger-jitter", "2")
    panel.fill("trigger-jitter-random", "1")
    panel.by_id("trigger-publish").click()
    panel.until(lambda d: "Published revision 1 of ctl/beat" in panel.text("trigger-result"),
                "the trigger published")
    shown = site.http.ok("GET", "/api/v1/projects/ctl/triggers/beat", site.admin)
    assert shown["kind"] == "interval" and shown["jitter"]["max_s"] == 2, shown
    assert shown["jitter"]["random_s"] == 1, shown
    # its page shows the schedule and the jitter; pause with a reason, then resume
    panel.open("/triggers/ctl/beat", "trigger")
    panel.until(lambda d: "every 5s" in panel.text("trigger-details"), "the details")
    assert "up to 2 s" in panel.text("trigger-details")
    panel.fill("pause-reason", "maintenance window")
    panel.by_id("trigger-pause").click()
    panel.until(lambda d: "maintenance window" in panel.text("trigger-details"), "paused")
    paused = site.http.ok("GET", "/api/v1/projects/ctl/triggers/beat", site.admin)
    assert paused["state"] == "paused" and paused["pause"]["reason"] == "maintenance window"
    panel.shot("paused")
    panel.by_id("trigger-resume").click()
    panel.until(lambda d: "maintenance window" not in panel.text("trigger-details"), "resumed")
    assert site.http.ok("GET", "/api/v1/projects/ctl/triggers/beat",
                        site.admin)["state"] == "firing"
    audit = site.http.ok("GET", "/api/v1/audit?limit=100", site.admin)["items"]
    assert {"trigger.pause", "trigger.resume"} <= {e["action"] for e in audit}
    site.http.ok("POST", "/api/v1/projects/ctl/triggers/beat/disable", site.admin, {})


def test_follow_a_log_live_and_cancel_a_running_run(panel: Panel, site: Site) -> None:
    publish_shell_task(site, "live", "lines",
                       "for i in 1 2 3 4 5 6; do echo line $i; sleep 0.5; done")
    publish_shell_task(site, "live", "long", "echo started; exec sleep 60")
    panel.login("operator")
    panel.open("/tasks", "tasks")
    panel.until(lambda d: panel.css('button[data-task="live/lines"]'), "the Run now button")
    panel.css('button[data-task="live/lines"]')[0].click()
    panel.ready("run")
    # the first line arrives while the command still runs
    panel.until(lambda d: "line 1" in panel.text("log"), "the first line", timeout=15)
    seen_early = panel.text("log")
    assert "line 6" not in seen_early, seen_early
    panel.until(lambda d: panel.by_id("log-state").get_attribute("data-ended") == "succeeded",
                "the end of the log", timeout=20)
    assert panel.text("log") == "".join(f"line {i}\n" for i in range(1, 7))
    panel.until(lambda d: "run.succeeded" in panel.text("timeline"), "the timeline")
    assert "attempt.running" in panel.text("timeline")
    assert [r[1] for r in panel.rows("attempts")] == ["succeeded"]
    assert not panel.by_id("run-cancel").is_displayed()
    panel.shot("log")

    panel.open("/tasks", "tasks")
    panel.until(lambda d: panel.css('button[data-task="live/long"]'), "the Run now button")
    panel.css('button[data-task="live/long"]')[0].click()
    panel.ready("run")
    panel.until(lambda d: "started" in panel.text("log") and
                panel.text("run-status") == "running", "the long Run running", timeout=15)
    cancel = panel.by_id("run-cancel")
    assert cancel.is_displayed()
    panel.shot("before-cancel")
    cancel.click()
    panel.until(lambda d: "Cancel" in panel.text("cancel-result"), "the cancel answer")
    panel.until(lambda d: panel.text("run-status") == "cancelled", "the Run cancelled",
                timeout=15)
    panel.until(lambda d: panel.by_id("log-state").get_attribute("data-ended") == "cancelled",
                "the log's end")
    assert not panel.by_id("run-cancel").is_displayed()
    timeline = panel.text("timeline")
    assert "run.cancel_requested" in timeline and "run.cancelled" in timeline, timeline
    assert "user:operator" in timeline
    assert "user" in panel.text("run-details")  # the cancel reason
    panel.shot("cancelled")
    run_id = urlparse(panel.d.current_url).path.rsplit("/", 1)[1]
    shown = site.http.ok("GET", f"/api/v1/runs/{run_id}", site.admin)["run"]
    assert shown["status"] == "cancelled" and shown["cancel_reason"] == "user"


def test_a_viewer_reads_but_gets_no_write_buttons_and_logs_out(panel: Panel, site: Site) -> None:
    publish_shell_task(site, "peek", "quiet", "true")
    run = site.http.ok("POST", "/api/v1/projects/peek/tasks/quiet/run", site.admin,
                       {"request_id": "peek-1"}, 201)
    panel.login("viewer")
    panel.open("/tasks", "tasks")
    panel.until(lambda d: panel.css('#tasks tr[data-task="peek/quiet"]'), "the task")
    assert not panel.css("button.run-now")
    assert not panel.read(lambda: [a for a in panel.css("#tasks a") if a.text == "Edit"])
    panel.open(f"/runs/{run['id']}", "run")
    panel.until(lambda d: panel.text("run-status") == "succeeded", "the Run's status")
    assert not panel.by_id("run-cancel").is_displayed()
    panel.open("/tasks/edit", "task-editor")
    assert not panel.by_id("task-publish").is_displayed()
    site.http.ok("POST", "/api/v1/projects/peek/triggers/daily/revisions", site.admin,
                 {"task": "quiet", "cron": "0 3 * * *", "timezone": "UTC"}, 201)
    panel.open("/triggers/peek/daily", "trigger")
    assert not panel.by_id("pause-form").is_displayed()
    assert not panel.by_id("trigger-fire").is_displayed()
    panel.by_id("logout").click()
    panel.ready("login")
    panel.d.get(site.base + "/stats")
    panel.ready("login")  # the session ended: back to the login page
    assert parse_qs(urlparse(panel.d.current_url).query)["next"] == ["/stats"]

