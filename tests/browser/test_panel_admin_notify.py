"""The fuller Notifications page (issue 23, item 1), in a real browser against `ql serve
--http`: an admin adds channels of each kind with that kind's fields (a refusal is shown
beside the form, a secret is sent once and never shown back), deletes one after a
confirmation, and adds and removes a project's rules; an operator retries a dead delivery and
sends a test but has no admin control; a viewer sees no write control at all. (The test send
itself is tested in test_panel_notify.py, against the same page.)"""

from __future__ import annotations

import pytest
from selenium import webdriver
from selenium.webdriver.support.ui import Select

from tests.browser.panel_support import Panel, Site, publish_shell_task
from tests.support.test_api_support import PASSWORD

pytestmark = pytest.mark.slow

CHANNELS = "/api/v1/notify/channels"
SECRET = "hmac-never-shown-Kx81"
WRITE_CONTROLS = ("#channel-add", "#rule-add", "[data-channel]", "[data-delete-channel]",
                  "[data-remove-rule]", "[data-retry]")


def _channel(site: Site, name: str, **fields: object) -> None:
    site.http.call("DELETE", f"{CHANNELS}/{name}", auth=site.admin)
    site.http.ok("POST", CHANNELS, site.admin,
                 {"name": name, "kind": "webhook", "url": "http://127.0.0.1:9/hook", **fields},
                 201)


def _channel_names(site: Site) -> list[str]:
    return [c["name"] for c in site.http.ok("GET", CHANNELS, site.admin)]


def _row(panel: Panel, table: str, attribute: str, key: str) -> list[str]:
    found = panel.d.execute_script(
        "var r = document.querySelector('#' + arguments[0] + ' tr[' + arguments[1] + '=\"' +"
        " arguments[2] + '\"]'); return r ? Array.prototype.map.call(r.cells,"
        " function (c) { return c.textContent; }) : null;", table, attribute, key)
    return [str(cell) for cell in found] if isinstance(found, list) else []


def _pick(panel: Panel, select_id: str, value: str) -> None:
    """Choose ``value`` in a <select> (its change event fires, as choosing by keyboard does)."""
    Select(panel.by_id(select_id)).select_by_visible_text(value)


def _open(panel: Panel, user: str) -> None:
    panel.login(user)
    panel.open("/notifications", "notifications")


def _add(panel: Panel, name: str, kind: str, fields: dict[str, str]) -> None:
    panel.fill("ch-name", name)
    _pick(panel, "ch-kind", kind)
    for field, text in fields.items():
        if panel.by_id(field).tag_name == "select":
            _pick(panel, field, text)
        else:
            panel.fill(field, text)
    panel.by_id("channel-add-submit").click()


def test_an_admin_adds_channels_of_each_kind_with_its_fields(panel: Panel, site: Site) -> None:
    for name in ("hook-a", "ntfy-a", "tpl-a", "mail-a"):
        site.http.call("DELETE", f"{CHANNELS}/{name}", auth=site.admin)
    _open(panel, "admin")
    # a kind shows only its own fields
    _pick(panel, "ch-kind", "email")
    assert panel.shown("#ch-smtp-host") == 1 and panel.shown("#ch-url") == 0
    _pick(panel, "ch-kind", "webhook")
    assert panel.shown("#ch-url") == 1 and panel.shown("#ch-smtp-host") == 0
    _add(panel, "hook-a", "webhook", {"ch-url": "http://127.0.0.1:9/hook",
                                      "ch-headers": "X-Team: ops", "ch-secret": SECRET})
    panel.until(lambda d: "Added the channel hook-a" in panel.text("notify-result"), "hook-a")
    row = panel.until(lambda d: _row(panel, "notify-channels", "data-channel-row", "hook-a"),
                      "hook-a's row")
    assert row[1:4] == ["webhook", "http://127.0.0.1:9/hook", "set"], row
    assert panel.by_id("ch-secret").get_attribute("value") == ""  # sent once, not kept
    assert SECRET not in panel.d.page_source
    _add(panel, "ntfy-a", "service", {"ch-service": "ntfy",
                                      "ch-params": "server=http://127.0.0.1:9\ntopic=ql"})
    row = panel.until(lambda d: _row(panel, "notify-channels", "data-channel-row", "ntfy-a"),
                      "ntfy-a's row")
    assert row[1] == "service:ntfy" and row[3] == "not set", row
    _add(panel, "tpl-a", "template", {"ch-url": "http://127.0.0.1:9/t", "ch-method": "PUT",
                                      "ch-body": '{"text": "from ql"}', "ch-params": ""})
    row = panel.until(lambda d: _row(panel, "notify-channels", "data-channel-row", "tpl-a"),
                      "tpl-a's row")
    assert row[1] == "template", row
    shown = site.http.ok("GET", f"{CHANNELS}/tpl-a", site.admin)
    assert shown["template"]["method"] == "PUT" and shown["template"]["body"] == {
        "text": "from ql"}
    # an email channel without its SMTP host: the API's problem beside the form
    _add(panel, "mail-a", "email", {"ch-from": "ql@example.com", "ch-to": "ops@example.com"})
    said = panel.until(lambda d: panel.text("channel-add-problem"), "the refusal")
    assert "smtp_host" in said, said
    assert "mail-a" not in _channel_names(site)
    panel.shot("notify-channels")


def test_deleting_a_channel_asks_first(panel: Panel, site: Site) -> None:
    _channel(site, "doomed")
    _open(panel, "admin")
    button = 'button[data-delete-channel="doomed"]'
    panel.click(button, "Delete")
    panel.click('tr[data-channel-row="doomed"] .confirm-no', "No")
    assert "doomed" in _channel_names(site)
    panel.click(button, "Delete")
    panel.click('tr[data-channel-row="doomed"] .confirm-yes', "Yes")
    panel.until(lambda d: "Deleted the channel doomed" in panel.text("notify-result"),
                "the deletion")
    panel.until(lambda d: not panel.css('tr[data-channel-row="doomed"]'), "the row gone")
    assert "doomed" not in _channel_names(site)


def test_an_admin_adds_and_removes_a_projects_rules(panel: Panel, site: Site) -> None:
    publish_shell_task(site, "rules", "nightly", "true")
    _channel(site, "ruled")
    _open(panel, "admin")
    panel.choose("rules-project", "rules")
    panel.until(lambda d: "No rule for rules" in panel.by_id("notify-rules").text, "no rule")
    panel.until(lambda d: panel.css('#rule-channel option[value="ruled"]'), "the channel")
    _pick(panel, "rule-channel", "ruled")
    panel.fill("rule-task", "nightly")
    panel.by_id("rule-event-failed").click()
    panel.by_id("rule-event-running_long").click()
    panel.fill("rule-running-long", "20m")
    panel.by_id("rule-add-submit").click()
    row = panel.until(lambda d: _row(panel, "notify-rules", "data-rule", "ruled/nightly"),
                      "the rule")
    assert row[1:4] == ["nightly", "failed, running_long", "running long 20m"], row
    rules = site.http.ok("GET", "/api/v1/notify/rules?project=rules", site.admin)
    assert [(r["channel"], r["task"], r["running_long_after_ms"]) for r in rules] == [
        ("ruled", "nightly", 1_200_000)]
    # a task id the API refuses: its problem beside the form
    panel.fill("rule-task", "Not A Task")
    panel.by_id("rule-add-submit").click()
    said = panel.until(lambda d: panel.text("rule-add-problem"), "the refusal")
    assert "task" in said, said
    # removing asks first
    panel.click('button[data-remove-rule="ruled/nightly"]', "Remove")
    panel.click('tr[data-rule="ruled/nightly"] .confirm-yes', "Yes")
    panel.until(lambda d: "Removed the rule" in panel.text("notify-result"), "the removal")
    panel.until(lambda d: not _row(panel, "notify-rules", "data-rule", "ruled/nightly"),
                "the rule gone")
    assert site.http.ok("GET", "/api/v1/notify/rules?project=rules", site.admin) == []


def _dead_delivery(site: Site) -> None:
    """A failed Run of project outbox told to a channel nobody listens on, tried once: dead."""
    _channel(site, "once", max_attempts=1, timeout_ms=1_000)
    publish_shell_task(site, "outbox", "fails", "exit 3")
    site.http.ok("POST", "/api/v1/notify/rules", site.admin,
                 {"channel": "once", "project": "outbox", "events": ["failed"]}, 201)
    site.http.ok("POST", "/api/v1/projects/outbox/tasks/fails/run", site.admin,
                 {"request_id": "dead-delivery"}, (200, 201))


def test_an_operator_retries_a_dead_delivery_and_has_no_admin_control(panel: Panel,
                                                                     site: Site) -> None:
    _dead_delivery(site)

    def dead(d: webdriver.Chrome) -> str | bool:
        items = site.http.ok("GET", "/api/v1/notify/deliveries?status=dead&channel=once",
                             site.admin)
        return str(items[0]["id"]) if items else False

    _open(panel, "operator")
    delivery = str(panel.until(dead, "a dead delivery", timeout=60))
    _pick(panel, "deliveries-status", "dead")
    retry = f'button[data-retry="{delivery}"]'
    panel.until(lambda d: panel.css(retry), "its Retry button")
    row = _row(panel, "notify-deliveries", "data-delivery", delivery)
    assert row[1:4] == ["once", "run.failed", "dead"] and row[4] == "1 / 1", row
    assert "outbox / fails" in row[7], row
    panel.click(retry, "Retry")
    panel.until(lambda d: "Sending the delivery" in panel.text("notify-result"), "the retry")
    audit = site.http.ok("GET", "/api/v1/audit?action=notify.retry", site.admin)["items"]
    assert [(e["actor"], e["target"]) for e in audit] == [("operator", f"delivery {delivery}")]
    # an operator: test sends and retries, but no channel or rule is theirs to change
    assert panel.shown("#channel-add") == 0 and panel.shown("#rule-add") == 0
    assert panel.css("[data-delete-channel]") and panel.shown("[data-delete-channel]") == 0
    assert panel.shown('button[data-channel="once"]') == 1


def test_a_viewer_sees_no_write_control_on_notifications(panel: Panel, site: Site) -> None:
    _channel(site, "looked-at")
    site.http.ok("POST", "/api/v1/projects", site.admin, {"id": "viewed"}, (201, 409))
    site.http.ok("POST", "/api/v1/notify/rules", site.admin,
                 {"channel": "looked-at", "project": "viewed"}, 201)
    _open(panel, "viewer")
    panel.until(lambda d: _row(panel, "notify-channels", "data-channel-row", "looked-at"),
                "the channel")
    panel.choose("rules-project", "viewed")
    panel.until(lambda d: _row(panel, "notify-rules", "data-rule", "looked-at/*"), "the rule")
    for selector in WRITE_CONTROLS:
        assert panel.shown(selector) == 0, selector
    assert panel.shown("#main input, #main textarea") == 0


def test_a_projects_admin_has_no_notification_control(panel: Panel, site: Site) -> None:
    """Channels, rules and the outbox reach every project: the API asks for a role on every
    project, so an admin of one project (by a grant) gets no control here."""
    _channel(site, "theirs")
    site.http.ok("POST", "/api/v1/projects", site.admin, {"id": "noras"}, (201, 409))
    site.http.ok("POST", "/api/v1/users", site.admin,
                 {"username": "nora", "role": "viewer", "password": PASSWORD},
                 (201, 409))
    site.http.ok("PUT", "/api/v1/projects/noras/grants/nora", site.admin, {"role": "admin"})
    site.http.ok("POST", "/api/v1/notify/rules", site.admin,
                 {"channel": "theirs", "project": "noras"}, 201)
    _open(panel, "nora")
    panel.choose("rules-project", "noras")
    panel.until(lambda d: _row(panel, "notify-rules", "data-rule", "theirs/*"), "the rule")
    for selector in WRITE_CONTROLS:
        assert panel.shown(selector) == 0, selector
