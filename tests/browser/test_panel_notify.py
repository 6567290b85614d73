"""The Notifications page (issue 22, item 5) in a real browser against `ql serve --http`: the
channels are listed with their secret shown only as "set"; an operator's "Send test" sends
``notify.test`` now through the same service call as `ql notify test` -- a signed Feishu
request reaches a local receiver, and the page says it was delivered -- and a channel whose
receiver is down is reported not delivered; a viewer sees no button."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.browser.panel_support import Panel, Site
from tests.contract.test_notify_services import Receiver

pytestmark = pytest.mark.slow

CHANNELS = "/api/v1/notify/channels"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.answer = b'{"code":0,"msg":"success"}'
    yield r
    r.close()


def _channels(site: Site, receiver: Receiver) -> None:
    for name in ("lark", "down"):  # a channel made by an earlier test in the same site stays
        site.http.call("DELETE", f"{CHANNELS}/{name}", auth=site.admin)
    site.http.ok("POST", CHANNELS, site.admin, {
        "name": "lark", "kind": "service", "service": "feishu",
        "params": {"server": receiver.url}, "secret": "hook-1:sign-secret"}, 201)
    site.http.ok("POST", CHANNELS, site.admin, {
        "name": "down", "kind": "webhook", "url": "http://127.0.0.1:9/hook",
        "timeout_ms": 1_000}, 201)


def test_an_operator_sends_a_test_notification_from_the_panel(panel: Panel, site: Site,
                                                              receiver: Receiver) -> None:
    _channels(site, receiver)
    panel.login("operator")
    panel.open("/notifications", "notifications")
    panel.until(lambda d: panel.css('#notify-channels button[data-channel="lark"]'),
                "the Send test button")
    rows = {r[0]: r for r in panel.rows("notify-channels")}
    assert rows["lark"][1] == "service:feishu" and rows["lark"][3] == "set"
    assert "sign-secret" not in panel.d.page_source and "hook-1" not in panel.d.page_source
    panel.click('#notify-channels button[data-channel="lark"]', "lark's Send test button")
    panel.until(lambda d: panel.by_id("notify-test-result").get_attribute("data-delivered")
                == "true", "the test to be delivered")
    assert panel.text("notify-test-result").startswith("Delivered to lark: HTTP 200")
    got = receiver.one()
    assert got.path == "/open-apis/bot/v2/hook/hook-1" and got.json["msg_type"] == "text"
    assert got.json["sign"] and got.json["timestamp"]
    assert got.headers["X-Qinglong-Event"] == "notify.test"
    panel.shot("notify-delivered")
    panel.click('#notify-channels button[data-channel="down"]', "down's Send test button")
    panel.until(lambda d: panel.by_id("notify-test-result").get_attribute("data-delivered")
                == "false", "the failed test to be reported")
    assert "Not delivered to down: connection refused" in panel.text("notify-test-result")


def test_a_viewer_sees_the_channels_but_no_test_button(panel: Panel, site: Site,
                                                       receiver: Receiver) -> None:
    _channels(site, receiver)
    panel.login("viewer")
    panel.open("/notifications", "notifications")
    panel.until(lambda d: any(r[0] == "lark" for r in panel.rows("notify-channels")),
                "the channel listed")
    selector = '#notify-channels button[data-channel="lark"]'
    assert panel.css(selector) and panel.shown(selector) == 0
