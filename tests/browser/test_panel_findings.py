"""The panel findings of issue 18, each in a real browser (Debian's headless chromium through
Selenium, in Asia/Shanghai) against a real `ql serve --http` on a temporary SQLite file.

The trigger editor loads a trigger's misfire and overlap policies (and publishing keeps a
queue's limit); "Pause until" takes a duration from now (`10m`) as the CLI does; the task
editor is refused a working directory that does not exist here, as `ql task publish` is; the
timeout reads durations (`1h` is an hour, a bare number is refused); the Runs filter takes
`project/trigger`, the form the panel shows; the log viewer shows terminal control characters
as their codes and drops colour sequences; no page is wider than a 390 px phone (tables
scroll in their own box); one date format everywhere, and no doubled punctuation.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from selenium.webdriver.support.ui import Select

from qinglong.domain.durations import parse_duration_ms
from qinglong.domain.identifiers import ENTITY_ID_RULE
from qinglong.web.definitions import UNTIL_RULE
from tests.browser.panel_support import VIEWER_ZONE, Panel, Site, publish_shell_task

pytestmark = pytest.mark.slow

# the panel's one format for an instant: in a zone with its offset, or in UTC
STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (?:UTC|GMT(?:[+-]\d{1,2}(?::\d\d)?)?)")
CLOCK_TIME = re.compile(r"\d{1,2}:\d\d:\d\d")
OTHER_TIME = re.compile(r"\d{1,2}:\d\d|\d{1,2}/\d{1,2}/\d{2,4}|\d{4}-\d\d-\d\dT")
RELATIVE = re.compile(r"\b\d+ (?:s|min|h|d) ago\b|\bin \d+ (?:s|min|h|d)\b")
DOUBLED = re.compile(r"[.,;:!?]\s*[.,;:!?]")
# what a terminal acts on and the log viewer must never hand the page raw
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")

# Every element wider than the viewport that is not inside a box that scrolls sideways (a
# box that scrolls must itself fit). SVG parts are judged by their box alone.
OVERFLOWING = """
var width = document.documentElement.clientWidth;
function scrolls(node) {
  var x = getComputedStyle(node).overflowX;
  return x === "auto" || x === "scroll";
}
function inScroller(node) {
  for (var up = node.parentElement; up; up = up.parentElement) if (scrolls(up)) return true;
  return false;
}
var found = [];
document.querySelectorAll("body *").forEach(function (node) {
  if (inScroller(node)) return;
  var box = node.getBoundingClientRect();
  if (!box.width && !box.height) return;
  var right = box.right;
  if (!scrolls(node) && !(node instanceof SVGElement)) {
    right = Math.max(right, box.left + node.scrollWidth);
  }
  if (right > width + 0.5) {
    found.push(node.tagName.toLowerCase() + (node.id ? "#" + node.id : "") + " reaches " +
      Math.round(right) + " px");
  }
});
if (document.documentElement.scrollWidth > width) {
  found.push("the page scrolls sideways: " + document.documentElement.scrollWidth + " px");
}
return found;
"""

# The text a person reads on the page: not code (schedules, ids), inputs or buttons.
READ_TEXT = """
var parts = [];
var walker = document.createTreeWalker(document.getElementById("main"), NodeFilter.SHOW_TEXT);
var skip = {CODE: 1, PRE: 1, BUTTON: 1, SELECT: 1, OPTION: 1, TEXTAREA: 1, SCRIPT: 1};
for (var node = walker.nextNode(); node; node = walker.nextNode()) {
  var hidden = false;
  for (var up = node.parentElement; up; up = up.parentElement) {
    if (skip[up.tagName] || up.hidden) { hidden = true; break; }
  }
  if (!hidden) parts.push(node.textContent);
}
return parts.join("\\n");
"""


def value(panel: Panel, element_id: str) -> str:
    return panel.by_id(element_id).get_attribute("value") or ""


def panel_stamp(ms: int, zone: str) -> str:
    """An instant as the panel shows it: 2026-03-08 17:00:00 GMT+8, or ... UTC."""
    at = datetime.fromtimestamp(ms / 1000, UTC).astimezone(ZoneInfo(zone))
    if zone == "UTC":
        return at.strftime("%Y-%m-%d %H:%M:%S UTC")
    offset = at.utcoffset()
    assert offset is not None
    minutes = int(offset.total_seconds()) // 60
    sign, size = ("-" if minutes < 0 else "+"), abs(minutes)
    label = "GMT" if not minutes else f"GMT{sign}{size // 60}" + (
        f":{size % 60:02d}" if size % 60 else "")
    return at.strftime("%Y-%m-%d %H:%M:%S ") + label


def publish_trigger(site: Site, project: str, trigger: str, body: dict[str, object]) -> None:
    site.http.ok("POST", f"/api/v1/projects/{project}/triggers/{trigger}/revisions", site.admin,
                 body, 201)


@pytest.fixture
def phone(panel: Panel) -> Iterator[Panel]:
    """The browser at a phone's width (390 x 844), back to its usual size afterwards."""
    panel.d.set_window_size(390, 844)
    try:
        assert panel.d.execute_script("return window.innerWidth") == 390
        yield panel
    finally:
        panel.d.set_window_size(1400, 1000)


# --- the editors ------------------------------------------------------------------------------


def test_the_trigger_editor_loads_misfire_and_overlap_and_keeps_them(panel: Panel,
                                                                     site: Site) -> None:
    publish_shell_task(site, "ed", "job", "true")
    publish_trigger(site, "ed", "held", {"task": "job", "cron": "0 3 * * *", "timezone": "UTC",
                                         "misfire": "fire_once", "overlap": "queue",
                                         "overlap_queue_limit": 5})
    panel.login("admin")
    panel.open("/triggers/edit?project=ed&trigger=held", "trigger-editor")
    panel.until(lambda d: value(panel, "trigger-cron") == "0 3 * * *"
                and value(panel, "trigger-task") == "job", "the loaded trigger")
    assert value(panel, "trigger-misfire") == "fire_once"
    assert value(panel, "trigger-overlap") == "queue"
    panel.shot("trigger-editor-loaded")
    # publishing another change keeps both policies, and the queue keeps its limit
    panel.fill("trigger-cron", "0 4 * * *")
    panel.by_id("trigger-publish").click()
    panel.until(lambda d: "Published revision 2 of ed/held" in panel.text("trigger-result"),
                "the second revision")
    shown = site.http.ok("GET", "/api/v1/projects/ed/triggers/held", site.admin)
    assert (shown["schedule"], shown["misfire"], shown["overlap"],
            shown["overlap_queue_limit"]) == ("0 4 * * *", "fire_once", "queue", 5), shown
    # a policy changed in the editor is published
    Select(panel.by_id("trigger-overlap")).select_by_value("skip")
    Select(panel.by_id("trigger-misfire")).select_by_value("skip")
    panel.by_id("trigger-publish").click()
    panel.until(lambda d: "Published revision 3 of ed/held" in panel.text("trigger-result"),
                "the third revision")
    shown = site.http.ok("GET", "/api/v1/projects/ed/triggers/held", site.admin)
    assert (shown["misfire"], shown["overlap"]) == ("skip", "skip"), shown


def test_pause_until_takes_a_duration_from_now_as_the_cli_does(panel: Panel, site: Site) -> None:
    publish_shell_task(site, "pz", "job", "true")
    publish_trigger(site, "pz", "nap", {"task": "job", "cron": "0 3 * * *", "timezone": "UTC"})
    panel.login("operator")
    panel.open("/triggers/pz/nap", "trigger")
    panel.until(lambda d: "0 3 * * *" in panel.text("trigger-details"), "the details")
    assert "10m" in (panel.by_id("pause-until").get_attribute("placeholder") or "")
    before_ms = int(time.time() * 1000)
    panel.fill("pause-until", "10m")
    panel.fill("pause-reason", "short break")
    panel.by_id("trigger-pause").click()
    panel.until(lambda d: "short break" in panel.text("trigger-details"), "the pause")
    after_ms = int(time.time() * 1000)
    pause = site.http.ok("GET", "/api/v1/projects/pz/triggers/nap", site.admin)["pause"]
    assert before_ms + 600_000 <= pause["until_ms"] <= after_ms + 600_000, pause
    assert f"until {panel_stamp(pause['until_ms'], VIEWER_ZONE)}" in panel.text(
        "trigger-details")
    panel.shot("paused-for-10m")
    # the API reads the CLI's duration grammar (one parser) and still reads instants
    base = "/api/v1/projects/pz/triggers/nap"
    site.http.ok("POST", f"{base}/resume", site.admin, {})
    asked_ms = int(time.time() * 1000)
    held = site.http.ok("POST", f"{base}/pause", site.admin, {"until": "1h30m"})["pause"]
    assert asked_ms + 5_400_000 <= held["until_ms"] <= int(time.time() * 1000) + 5_400_000
    site.http.ok("POST", f"{base}/resume", site.admin, {})
    instant = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0)
    held = site.http.ok("POST", f"{base}/pause", site.admin,
                        {"until": instant.isoformat().replace("+00:00", "Z")})["pause"]
    assert held["until_ms"] == int(instant.timestamp()) * 1000, held
    site.http.ok("POST", f"{base}/resume", site.admin, {})
    refused = site.http.call("POST", f"{base}/pause", auth=site.admin,
                             body={"until": "10x"}).problem(422, "QL_INVALID_INPUT")
    assert refused["detail"] == f"until: {UNTIL_RULE}", refused
    # the panel shows the API's refusal, without doubled punctuation
    panel.fill("pause-until", "10x")
    panel.by_id("trigger-pause").click()
    panel.until(lambda d: "until" in panel.text("trigger-action-result"), "the refusal")
    assert panel.text("trigger-action-result") == (
        f"An input value breaks a rule: until: {UNTIL_RULE}")


def test_the_task_editor_is_refused_a_working_directory_that_does_not_exist(
        panel: Panel, site: Site, tmp_path: Path) -> None:
    missing = "/nonexistent/ql-panel-findings"
    panel.login("admin")
    panel.open("/tasks/edit", "task-editor")
    panel.fill("task-project", "wd")
    panel.fill("task-id", "here")
    panel.fill("task-command", "pwd")
    panel.fill("task-wd", missing)
    panel.by_id("task-publish").click()
    panel.until(lambda d: "does not exist" in panel.text("task-result"), "the refusal")
    assert panel.text("task-result") == (
        f"An input value breaks a rule: working_directory: directory '{missing}' does not "
        "exist on this host (commands of the SQLite profiles run here)")
    site.http.call("GET", "/api/v1/projects/wd/tasks/here",
                   auth=site.admin).problem(404, "QL_NOT_FOUND")
    panel.shot("missing-directory")
    # a directory that exists here is published
    panel.fill("task-wd", str(tmp_path))
    panel.by_id("task-publish").click()
    panel.until(lambda d: "Published revision 1 of wd/here" in panel.text("task-result"),
                "the task published")
    shown = site.http.ok("GET", "/api/v1/projects/wd/tasks/here", site.admin)
    assert shown["working_directory"] == str(tmp_path), shown


TIMEOUT_TEXTS = ("1h", "1h30m", "90s", "1.5h", "500ms", "1m 30s", "2d4h", "5m ", "90", "1m1h",
                 "1x", "h", "0.0005s", "1.0000001s", "1hh")


def test_the_timeout_reads_durations_and_never_takes_1h_for_a_second(panel: Panel,
                                                                     site: Site) -> None:
    panel.login("admin")
    panel.open("/tasks/edit", "task-editor")
    # beside the field: what the text reads as, by the grammar of the CLI and the API
    note = panel.by_id("task-timeout-note")
    for text in TIMEOUT_TEXTS:
        panel.fill("task-timeout", text)
        try:
            expected: int | str = parse_duration_ms(text.strip())
        except ValueError as exc:
            expected = str(exc)
        if isinstance(expected, int):
            panel.until(lambda d, ms=expected: note.get_attribute("data-ms") == str(ms),
                        f"{text!r} read as {expected} ms")
        else:
            panel.until(lambda d, why=expected: note.text == why, f"{text!r} refused")
            assert note.get_attribute("class") == "problem"
    panel.fill("task-project", "to")
    panel.fill("task-id", "slow")
    panel.fill("task-command", "true")
    panel.fill("task-timeout", "1h")
    assert panel.text("task-timeout-note") == "= 1h"
    panel.by_id("task-publish").click()
    panel.until(lambda d: "Published revision 1 of to/slow" in panel.text("task-result"),
                "the task published")
    shown = site.http.ok("GET", "/api/v1/projects/to/tasks/slow", site.admin)
    assert shown["timeout_ms"] == 3_600_000, shown
    panel.fill("task-timeout", "1h30m")
    panel.by_id("task-publish").click()
    panel.until(lambda d: "Published revision 2 of to/slow" in panel.text("task-result"),
                "the second revision")
    assert site.http.ok("GET", "/api/v1/projects/to/tasks/slow",
                        site.admin)["timeout_ms"] == 5_400_000
    # a number without a unit is refused here, and nothing is sent
    panel.fill("task-timeout", "90")
    panel.by_id("task-publish").click()
    panel.until(lambda d: "is not a duration" in panel.text("task-result"), "the refusal")
    assert panel.text("task-result") == (
        "Not published: timeout: '90' is not a duration; use numbers with units (d, h, m, s, "
        "ms), largest first: 500ms, 30s, 5m, 1h30m, 1d")
    shown = site.http.ok("GET", "/api/v1/projects/to/tasks/slow", site.admin)
    assert (shown["revision"], shown["timeout_ms"]) == (2, 5_400_000), shown
    # a loaded task shows its timeout in the same grammar
    panel.open("/tasks/edit?project=to&task=slow", "task-editor")
    panel.until(lambda d: value(panel, "task-timeout") == "1h30m", "the loaded timeout")
    panel.shot("timeout")


# --- Runs and logs ----------------------------------------------------------------------------


def test_the_runs_filter_takes_project_slash_trigger_as_the_panel_shows_it(
        panel: Panel, site: Site) -> None:
    publish_shell_task(site, "rf", "job", "true")
    publish_trigger(site, "rf", "daily", {"task": "job", "cron": "0 3 * * *", "timezone": "UTC"})
    for n in range(2):
        site.http.ok("POST", "/api/v1/projects/rf/triggers/daily/fire", site.admin,
                     {"request_id": f"rf-fire-{n}"}, 201)
    site.http.ok("POST", "/api/v1/projects/rf/tasks/job/run", site.admin,
                 {"request_id": "rf-run"}, 201)  # a Run of the task without the trigger
    panel.login("viewer")
    panel.open("/runs", "runs")
    panel.fill("filter-trigger", "rf/daily")
    panel.css("#run-filter button[type=submit]")[0].click()
    panel.until(lambda d: len(panel.css("#runs tr[data-run]")) == 2
                and all(r[2] == "rf/daily" for r in panel.rows("runs")), "the trigger's Runs")
    assert not panel.by_id("problem").is_displayed()
    panel.shot("runs-filter")
    # the API reads both forms, spaces around the slash too, and refuses a contradiction
    runs = "/api/v1/runs?trigger="
    assert len(site.http.ok("GET", runs + "rf/daily", site.admin)["items"]) == 2
    assert len(site.http.ok("GET", runs + "daily&project=rf", site.admin)["items"]) == 2
    assert len(site.http.ok("GET", "/api/v1/runs?task=rf%20/%20job", site.admin)["items"]) == 3
    refused = site.http.call("GET", runs + "rf/daily&project=ed",
                             auth=site.admin).problem(422, "QL_INVALID_INPUT")
    assert refused["field"] == "trigger" and "'rf'" in refused["detail"], refused
    # a bad trigger id: the API's reason, its title without a stop before the colon
    panel.fill("filter-trigger", "no such!")
    panel.css("#run-filter button[type=submit]")[0].click()
    panel.until(lambda d: panel.by_id("problem").is_displayed(), "the refusal")
    assert panel.text("problem") == f"An input value breaks a rule: trigger: {ENTITY_ID_RULE}"


LOUD = ("printf '\\033[1;32mgreen\\033[0m|\\033[2J|bell\\007|cr\\rdone|\\342\\200\\256rtl|"
        "soh\\001|\\r\\n'; printf '\\033[3'; sleep 1; printf '1mlater\\033[0m\\n'")


def test_the_log_viewer_shows_control_characters_and_drops_colours(panel: Panel,
                                                                   site: Site) -> None:
    publish_shell_task(site, "tty", "loud", LOUD)
    panel.login("operator")
    panel.open("/tasks", "tasks")
    panel.until(lambda d: panel.css('button[data-task="tty/loud"]'), "the Run now button")
    panel.css('button[data-task="tty/loud"]')[0].click()
    panel.ready("run")
    panel.until(lambda d: panel.by_id("log-state").get_attribute("data-ended") == "succeeded",
                "the end of the log", timeout=20)
    shown = panel.text("log")
    assert not RAW_CONTROL.search(shown), repr(shown)
    assert shown == ("green|\\x1b[2J|bell\\x07|cr\\x0ddone|\\u202ertl|soh\\x01|\n"
                     "later\n"), repr(shown)
    codes = panel.read(lambda: [node.text for node in panel.css("#log span.ctl")])
    assert codes == ["\\x1b", "\\x07", "\\x0d", "\\u202e", "\\x01"], codes
    assert not panel.css("#log [style]")  # text and classes only: the CSP stays strict
    panel.d.execute_script("document.getElementById('log').scrollIntoView()")
    panel.shot("log-controls")


# --- the whole panel --------------------------------------------------------------------------


def test_no_page_is_wider_than_a_phone(phone: Panel, site: Site) -> None:
    publish_shell_task(site, "narrow", "a-task-with-a-rather-long-identifier",
                       "echo " + "a-long-unbroken-word-" * 12 + "; echo done")
    publish_trigger(site, "narrow", "a-trigger-with-a-long-name",
                    {"task": "a-task-with-a-rather-long-identifier", "cron": "30 2 * * 1-5",
                     "timezone": "America/New_York"})
    run = site.http.ok("POST", "/api/v1/projects/narrow/triggers/a-trigger-with-a-long-name/fire",
                       site.admin, {"request_id": "narrow-1"}, 201)
    phone.d.delete_all_cookies()
    phone.open("/login", "login")
    assert phone.d.execute_script(OVERFLOWING) == [], "login"
    phone.login("admin")
    pages = [
        ("/", "dashboard", lambda: any(r[0] == "narrow/a-trigger-with-a-long-name"
                                       for r in phone.rows("triggers"))),
        ("/tasks", "tasks", lambda: bool(phone.css('#tasks tr[data-task^="narrow/"]'))),
        ("/tasks/edit?project=narrow&task=a-task-with-a-rather-long-identifier", "task-editor",
         lambda: "a-long-unbroken-word" in value(phone, "task-command")),
        ("/triggers/edit?project=narrow&trigger=a-trigger-with-a-long-name", "trigger-editor",
         lambda: len(phone.rows("preview")) == 8),
        ("/triggers/narrow/a-trigger-with-a-long-name", "trigger",
         lambda: len(phone.rows("next-fires")) == 5 and bool(phone.rows("ledger"))),
        ("/runs?project=narrow", "runs", lambda: bool(phone.css("#runs tr[data-run]"))),
        (f"/runs/{run['id']}", "run",
         lambda: "done" in phone.text("log") and "run.succeeded" in phone.text("timeline")),
        ("/stats?project=narrow", "stats", lambda: bool(phone.css("#stats-svg g.bar"))),
    ]
    for path, name, drawn in pages:
        phone.open(path, name)
        phone.until(lambda d, drawn=drawn: drawn(), f"{path} drawn", timeout=25)
        assert phone.d.execute_script(OVERFLOWING) == [], path
        # a table too wide for the phone scrolls inside its own box
        for box in phone.css(".table-scroll"):
            assert phone.d.execute_script(
                "return getComputedStyle(arguments[0]).overflowX", box) == "auto"
    phone.shot("phone-run")


def test_one_date_format_everywhere_and_no_doubled_punctuation(panel: Panel,
                                                               site: Site) -> None:
    publish_shell_task(site, "fmt", "job", "echo hi")
    publish_trigger(site, "fmt", "ny", {"task": "job", "cron": "15 9 * * *",
                                        "timezone": "America/New_York"})
    run = site.http.ok("POST", "/api/v1/projects/fmt/triggers/ny/fire", site.admin,
                       {"request_id": "fmt-1"}, 201)
    trigger = site.http.ok("GET", "/api/v1/projects/fmt/triggers/ny?next=5", site.admin)
    first_ms = trigger["next_fire_at_ms"][0]
    panel.login("admin")

    def read(path: str, name: str, drawn: str, least: int) -> str:
        """The page's text once it shows ``drawn`` and at least ``least`` times of day (in
        whatever format), all of them in the panel's one format."""
        panel.open(path, name)

        def shown(d: object) -> str | None:
            text = str(panel.d.execute_script(READ_TEXT))
            return text if drawn in text and len(CLOCK_TIME.findall(text)) >= least else None

        text = panel.until(shown, f"{path} drawn with {least} times")
        assert len(STAMP.findall(text)) >= least, (path, text)
        rest = STAMP.sub("", text)
        assert not OTHER_TIME.search(rest), (path, OTHER_TIME.search(rest), text)
        assert not RELATIVE.search(text), (path, text)
        assert not DOUBLED.search(text), (path, DOUBLED.search(text), text)
        return text

    # one trigger's next fire: in its zone, in the viewer's and in UTC, all one format
    read("/triggers/fmt/ny", "trigger", "pending", 5 * 3)
    assert panel.rows("next-fires")[0] == [panel_stamp(first_ms, "America/New_York"),
                                           panel_stamp(first_ms, VIEWER_ZONE),
                                           panel_stamp(first_ms, "UTC")]
    ledger = next(r for r in panel.rows("ledger") if r[4] == "pending")
    assert [STAMP.fullmatch(cell) is not None for cell in ledger[:3]] == [True] * 3, ledger
    panel.shot("one-format-trigger")
    read("/", "dashboard", "fmt/ny", 3)
    [row] = [r for r in panel.rows("triggers") if r[0] == "fmt/ny"]
    assert (row[4], row[5]) == (panel_stamp(first_ms, VIEWER_ZONE),
                                panel_stamp(first_ms, "UTC")), row
    read("/triggers/edit?project=fmt&trigger=ny", "trigger-editor", "GMT-", 8 * 3)
    read("/runs?project=fmt", "runs", "fmt/ny", 1)
    read(f"/runs/{run['id']}", "run", "run.succeeded", 4)
    read("/stats?project=fmt", "stats", "Days of", 0)
