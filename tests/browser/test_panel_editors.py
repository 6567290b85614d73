"""The task and trigger editors with every field the API takes (issue 23, item 1), in a real
browser against `ql serve --http`: an argv task published with every field reads back the
same through the API, and loaded again it fills every field (a publish of what was loaded
changes nothing); an argv task edited stays argv; a script task; a trigger of each kind
(cron with its DST policy, queue and parameter values; interval from its own fields; once)
reads back the same and republishes as nothing changed; the API's refusal shows next to the
publish button."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from selenium.webdriver.support.ui import Select

from tests.browser.panel_support import Panel, Site

pytestmark = pytest.mark.slow


def value(panel: Panel, element_id: str) -> str:
    return panel.by_id(element_id).get_attribute("value") or ""


def checked(panel: Panel, element_id: str) -> bool:
    return bool(panel.by_id(element_id).is_selected())


def publish(panel: Panel, button: str, result: str, expected: str) -> None:
    # an editor that loads a definition keeps its button disabled until the form is whole
    panel.until(lambda d: panel.by_id(button).is_enabled(), f"{button} to be enabled")
    panel.by_id(button).click()
    panel.until(lambda d: expected in panel.text(result), expected)


def task(site: Site, project: str, name: str) -> dict[str, object]:
    shown = site.http.ok("GET", f"/api/v1/projects/{project}/tasks/{name}", site.admin)
    assert isinstance(shown, dict)
    return shown


def seed_project(site: Site, project: str) -> None:
    site.http.ok("POST", "/api/v1/projects", site.admin, {"id": project}, (201, 409))


ARGV = ["/bin/echo", "hello  world", "--flag=$HOME"]


def test_an_argv_task_with_every_field_reads_back_and_loads_again(panel: Panel, site: Site,
                                                                   tmp_path: Path) -> None:
    panel.login("admin")
    panel.open("/tasks/edit", "task-editor")
    panel.fill("task-project", "edx")
    panel.fill("task-id", "all")
    panel.fill("task-name", "Every field")
    Select(panel.by_id("task-kind")).select_by_value("argv")
    assert not panel.by_id("task-command").is_displayed()
    panel.fill("task-argv", "\n".join(ARGV))
    panel.fill("task-wd", str(tmp_path))
    panel.fill("task-timeout", "2m")
    panel.fill("task-attempts", "3")
    panel.fill("task-backoff", "5s")
    panel.fill("task-max-backoff", "1m")
    panel.fill("task-retry-codes", "75, 1")
    panel.by_id("task-retry-timeout").click()
    panel.fill("task-concurrency", "2")
    panel.by_id("task-idempotent").click()
    panel.fill("task-requires", "gpu, region=eu")
    panel.fill("task-memory", "64M")
    panel.fill("task-cpu", "30s")
    panel.by_id("param-add").click()
    panel.css("#param-rows .param-name")[0].send_keys("count")
    Select(panel.css("#param-rows .param-type")[0]).select_by_value("integer")
    panel.css("#param-rows .param-default")[0].send_keys("3")
    panel.by_id("env-add").click()
    panel.css("#env-new .env-name")[0].send_keys("TOKEN")
    panel.css("#env-new .env-value")[0].send_keys("s3cret-value")
    panel.by_id("task-enabled").click()  # published disabled
    panel.shot("argv-every-field")
    publish(panel, "task-publish", "task-result", "Published revision 1 of edx/all")

    shown = task(site, "edx", "all")
    assert shown["command"] == {"kind": "argv", "argv": ARGV}, shown
    assert (shown["name"], shown["enabled"], shown["working_directory"], shown["timeout_ms"]) == (
        "Every field", False, str(tmp_path), 120_000), shown
    assert shown["retry"] == {"max_attempts": 3, "backoff_ms": 5_000, "max_backoff_ms": 60_000,
                              "on_exit_codes": [1, 75], "on_timeout": True}, shown
    assert (shown["concurrency"], shown["idempotent"], shown["requires"]) == (
        2, True, ["gpu", "region=eu"]), shown
    assert (shown["memory_limit_bytes"], shown["cpu_limit_s"]) == (64 * 1024**2, 30), shown
    assert shown["parameters"] == [{"name": "count", "type": "integer", "default": 3}], shown
    assert shown["environment"] == ["TOKEN"], shown
    assert "s3cret-value" not in panel.d.page_source

    # loaded again, every field shows what was published; publishing it changes nothing
    panel.open("/tasks/edit?project=edx&task=all", "task-editor")
    panel.until(lambda d: value(panel, "task-argv") == "\n".join(ARGV), "the loaded argv")
    assert value(panel, "task-kind") == "argv"
    assert [value(panel, f) for f in ("task-name", "task-wd", "task-timeout", "task-attempts",
                                      "task-backoff", "task-max-backoff", "task-retry-codes",
                                      "task-concurrency", "task-requires", "task-memory",
                                      "task-cpu")] == [
        "Every field", str(tmp_path), "2m", "3", "5s", "1m", "1, 75", "2", "gpu, region=eu",
        "64M", "30s"]
    assert [checked(panel, f) for f in ("task-enabled", "task-retry-timeout",
                                        "task-idempotent")] == [False, True, True]
    assert [panel.css(".param-name")[0].get_attribute("value"),
            panel.css(".param-type")[0].get_attribute("value"),
            panel.css(".param-default")[0].get_attribute("value")] == ["count", "integer", "3"]
    assert "TOKEN" in panel.text("env-existing")
    publish(panel, "task-publish", "task-result", "Nothing changed: still revision 1")
    panel.shot("argv-loaded")


def test_editing_an_argv_task_keeps_it_argv(panel: Panel, site: Site) -> None:
    seed_project(site, "edx")
    site.http.ok("POST", "/api/v1/projects/edx/tasks/prog/revisions", site.admin,
                 {"command": {"kind": "argv", "argv": ["/bin/sh", "-c", "echo one two"]}}, 201)
    panel.login("admin")
    panel.open("/tasks/edit?project=edx&task=prog", "task-editor")
    panel.until(lambda d: value(panel, "task-argv") == "/bin/sh\n-c\necho one two",
                "the loaded argv")
    assert value(panel, "task-kind") == "argv" and panel.text("task-result") == ""
    panel.fill("task-timeout", "45s")
    publish(panel, "task-publish", "task-result", "Published revision 2 of edx/prog")
    shown = task(site, "edx", "prog")
    assert shown["command"] == {"kind": "argv", "argv": ["/bin/sh", "-c", "echo one two"]}
    assert shown["timeout_ms"] == 45_000
    # an argument changed in the editor is published, still as argv
    panel.fill("task-argv", "/bin/sh\n-c\necho three")
    publish(panel, "task-publish", "task-result", "Published revision 3 of edx/prog")
    assert task(site, "edx", "prog")["command"] == {"kind": "argv",
                                                   "argv": ["/bin/sh", "-c", "echo three"]}
    # and the API's refusal of a relative program shows beside the button, nothing published
    panel.fill("task-argv", "echo\nrelative")
    panel.by_id("task-publish").click()
    panel.until(lambda d: "command" in panel.text("task-result")
                and panel.css("#task-result .problem"), "the refusal")
    assert task(site, "edx", "prog")["revision"] == 3


def test_a_script_task_from_the_editor(panel: Panel, site: Site) -> None:
    seed_project(site, "eds")
    site.http.ok("PUT", "/api/v1/projects/eds/scripts/content", site.admin,
                 {"path": "tools/greet.py", "content": "import sys\nprint(sys.argv[1:])\n"},
                 (200, 201))
    panel.login("admin")
    panel.open("/tasks/edit?project=eds", "task-editor")
    panel.fill("task-id", "greet")
    Select(panel.by_id("task-kind")).select_by_value("script")
    panel.fill("task-script-path", "tools/greet.py")
    panel.fill("task-script-args", "one\ntwo words")
    publish(panel, "task-publish", "task-result", "Published revision 1 of eds/greet")
    command = task(site, "eds", "greet")["command"]
    assert isinstance(command, dict)
    assert (command["kind"], command["script"], command["interpreter"], command["argv"]) == (
        "script", "tools/greet.py", "python3", ["python3", "tools/greet.py", "one", "two words"])
    panel.open("/tasks/edit?project=eds&task=greet", "task-editor")
    panel.until(lambda d: value(panel, "task-script-path") == "tools/greet.py", "the script")
    assert (value(panel, "task-kind"), value(panel, "task-interpreter"),
            value(panel, "task-script-args")) == ("script", "python3", "one\ntwo words")
    publish(panel, "task-publish", "task-result", "Nothing changed: still revision 1")


def epoch_ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp()) * 1000


def trigger(site: Site, project: str, name: str) -> dict[str, object]:
    shown = site.http.ok("GET", f"/api/v1/projects/{project}/triggers/{name}", site.admin)
    assert isinstance(shown, dict)
    return shown


def new_trigger(panel: Panel, project: str, name: str, task_id: str) -> None:
    panel.open(f"/triggers/edit?project={project}&task={task_id}", "trigger-editor")
    panel.fill("trigger-id", name)
    panel.until(lambda d: value(panel, "trigger-task") == task_id, "the task chosen")
    panel.fill("trigger-timezone", "Europe/Berlin")


def test_a_cron_trigger_with_every_field(panel: Panel, site: Site) -> None:
    seed_project(site, "edt")
    site.http.ok("POST", "/api/v1/projects/edt/tasks/job/revisions", site.admin, {
        "command": {"kind": "shell", "command": "echo $who"},
        "parameters": [{"name": "who", "default": "world"},
                       {"name": "n", "type": "integer", "default": 1}]}, 201)
    panel.login("admin")
    new_trigger(panel, "edt", "nightly", "job")
    panel.fill("trigger-cron", "30 2 * * *")
    panel.until(lambda d: len(panel.rows("preview")) == 8, "the preview")
    assert value(panel, "trigger-kind") == "cron"
    Select(panel.by_id("trigger-misfire")).select_by_value("fire_once")
    Select(panel.by_id("trigger-overlap")).select_by_value("queue")
    panel.fill("trigger-queue-limit", "4")
    Select(panel.by_id("trigger-dst-gap")).select_by_value("skip")
    Select(panel.by_id("trigger-dst-overlap")).select_by_value("both")
    panel.fill("trigger-jitter", "30")
    panel.fill("trigger-jitter-random", "10")
    panel.until(lambda d: panel.css('#trigger-params input[data-name="n"]'), "the parameters")
    panel.css('#trigger-params input[data-name="who"]')[0].send_keys("panel")
    panel.css('#trigger-params input[data-name="n"]')[0].send_keys("7")
    panel.shot("cron-every-field")
    publish(panel, "trigger-publish", "trigger-result", "Published revision 1 of edt/nightly")
    shown = trigger(site, "edt", "nightly")
    assert (shown["kind"], shown["schedule"], shown["timezone"], shown["misfire"],
            shown["overlap"], shown["overlap_queue_limit"]) == (
        "cron", "30 2 * * *", "Europe/Berlin", "fire_once", "queue", 4), shown
    assert shown["dst"] == {"gap": "skip", "overlap": "both"}, shown
    assert (shown["jitter"]["max_s"], shown["jitter"]["random_s"]) == (30, 10), shown  # type: ignore[index]
    assert (shown["parameters"], shown["enabled"]) == ({"who": "panel", "n": 7}, True), shown

    panel.open("/triggers/edit?project=edt&trigger=nightly", "trigger-editor")
    panel.until(lambda d: value(panel, "trigger-cron") == "30 2 * * *"
                and value(panel, "trigger-task") == "job"
                and panel.css('#trigger-params input[data-name="n"]'), "the loaded trigger")
    assert [value(panel, f) for f in (
        "trigger-kind", "trigger-timezone", "trigger-misfire", "trigger-overlap",
        "trigger-queue-limit", "trigger-dst-gap", "trigger-dst-overlap", "trigger-jitter",
        "trigger-jitter-random")] == ["cron", "Europe/Berlin", "fire_once", "queue", "4", "skip",
                                      "both", "30", "10"]
    assert panel.css('#trigger-params input[data-name="n"]')[0].get_attribute("value") == "7"
    publish(panel, "trigger-publish", "trigger-result", "Nothing changed: still revision 1")
    # disabled from the editor: the checkbox is what is sent
    panel.by_id("trigger-enabled").click()
    publish(panel, "trigger-publish", "trigger-result", "Published revision 2 of edt/nightly")
    assert trigger(site, "edt", "nightly")["state"] == "disabled"


def test_an_interval_and_a_one_shot_trigger_from_their_own_fields(panel: Panel,
                                                                  site: Site) -> None:
    seed_project(site, "edt")
    site.http.ok("POST", "/api/v1/projects/edt/tasks/ping/revisions", site.admin,
                 {"command": {"kind": "shell", "command": "true"}}, (200, 201))
    panel.login("admin")
    new_trigger(panel, "edt", "often", "ping")
    Select(panel.by_id("trigger-kind")).select_by_value("interval")
    assert not panel.by_id("trigger-dst-gap").is_displayed()  # a cron trigger's only
    panel.fill("trigger-every", "1h30m")
    panel.fill("trigger-anchor", "2030-01-01T00:00:00Z")
    assert value(panel, "trigger-cron") == "every 1h30m from 2030-01-01T00:00:00Z"
    panel.until(lambda d: len(panel.rows("preview")) == 8, "the interval's preview")
    publish(panel, "trigger-publish", "trigger-result", "Published revision 1 of edt/often")
    shown = trigger(site, "edt", "often")
    assert (shown["kind"], shown["every_s"], shown["anchor_ms"]) == (
        "interval", 5400, epoch_ms("2030-01-01T00:00:00+00:00")), shown
    panel.open("/triggers/edit?project=edt&trigger=often", "trigger-editor")
    panel.until(lambda d: value(panel, "trigger-every") == "1h30m", "the loaded interval")
    assert value(panel, "trigger-kind") == "interval"
    publish(panel, "trigger-publish", "trigger-result", "Nothing changed: still revision 1")

    new_trigger(panel, "edt", "once", "ping")
    Select(panel.by_id("trigger-kind")).select_by_value("once")
    panel.fill("trigger-at", "2031-06-01T08:00:00Z")
    assert value(panel, "trigger-cron") == "at 2031-06-01T08:00:00Z"
    panel.until(lambda d: len(panel.rows("preview")) == 1, "the one fire")
    publish(panel, "trigger-publish", "trigger-result", "Published revision 1 of edt/once")
    shown = trigger(site, "edt", "once")
    assert (shown["kind"], shown["at_ms"]) == ("once", epoch_ms("2031-06-01T08:00:00+00:00")), shown
    # typing a schedule picks its kind; the API's refusal shows beside the button
    panel.fill("trigger-cron", "at yesterday")
    panel.until(lambda d: value(panel, "trigger-kind") == "once", "the kind followed")
    panel.by_id("trigger-publish").click()
    panel.until(lambda d: panel.css("#trigger-result .problem"), "the refusal")
    assert trigger(site, "edt", "once")["revision"] == 1
