"""The service channels (issue 22, item 5) against a local receiver: each sends what its
service documents -- method, path, query, headers and body -- and DingTalk's and Feishu's
signatures are recomputed here, independently of qinglong's code, from the secret and the
timestamp the request carries (the injected clock's instant of the send). A 2xx answer whose
JSON says the service refused is a failure; the secret never shows in what a send reports.

The last tests go through the notify store on every database (SQLite, PostgreSQL): a service
channel is stored, read back without its secret, and ``Notifications.send_test`` sends it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from qinglong.domain.notify import payload as documents
from qinglong.domain.notify.channels import ChannelSpec
from qinglong.domain.notify.services import service_target
from qinglong.errors import InvalidInput
from qinglong.notify.senders import Sender, SendResult
from qinglong.service.notifications import Notifications
from qinglong.service.views.notify import channel_view
from qinglong.testing import FakeClock
from tests.contract.conftest import Backend
from tests.contract.test_notify_outbox import notify_stores

NOW_MS = 1_800_000_123_456  # the fake clock: what the signatures are over


@dataclass
class Got:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        value = json.loads(self.body)
        assert isinstance(value, dict)
        return value


class Receiver:
    """An HTTP server on 127.0.0.1 that keeps every request and answers ``status`` with
    ``answer``."""

    def __init__(self) -> None:
        self.got: list[Got] = []
        self.status = 200
        self.answer = b"{}"
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                parts = urlsplit(self.path)
                receiver.got.append(Got(method=self.command, path=parts.path,
                                        query=parse_qs(parts.query, keep_blank_values=True),
                                        headers=dict(self.headers.items()),
                                        body=self.rfile.read(length)))
                self.send_response(receiver.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(receiver.answer)))
                self.end_headers()
                self.wfile.write(receiver.answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def one(self) -> Got:
        [got] = self.got
        return got

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def document() -> dict[str, Any]:
    event = documents.NotifyEvent(event="run.failed", source_key="run.failed:r1",
                                  occurred_at_ms=NOW_MS - 5_000, project_id="demo",
                                  task_id="backup", trigger_id="nightly")
    return documents.build(event, delivery_id="d-1", channel="ch")


def send(service: str, secret: str | None, **params: str) -> SendResult:
    spec = ChannelSpec(name="ch", target=service_target(service, params), timeout_ms=5_000)
    return Sender(FakeClock(NOW_MS)).send(spec, secret, document())


def text_of(doc: dict[str, Any]) -> str:
    return f"{doc['title']}\n{doc['summary']}"


# --- DingTalk and Feishu: signed -------------------------------------------------------------


def test_dingtalk_sends_a_text_message_signed_over_the_send_instant(receiver: Receiver) -> None:
    receiver.answer = b'{"errcode":0,"errmsg":"ok"}'
    result = send("dingtalk", "tok123:SECabc", server=receiver.url)
    assert result.ok, result.detail
    got = receiver.one()
    assert (got.method, got.path) == ("POST", "/robot/send")
    assert got.query["access_token"] == ["tok123"]
    assert got.query["timestamp"] == [str(NOW_MS)]  # milliseconds, from the injected clock
    # the signature, as DingTalk checks it: HMAC-SHA256 keyed by the secret over
    # "<timestamp>\n<secret>", base64, URL-encoded (parse_qs decoded it once)
    expected = base64.b64encode(hmac.new(b"SECabc", f"{NOW_MS}\nSECabc".encode(),
                                         hashlib.sha256).digest()).decode()
    assert got.query["sign"] == [expected]
    assert got.headers["Content-Type"].startswith("application/json")
    assert got.json == {"msgtype": "text", "text": {"content": text_of(document())}}


def test_dingtalk_without_a_signing_secret_sends_no_signature(receiver: Receiver) -> None:
    receiver.answer = b'{"errcode":0}'
    assert send("dingtalk", "tok123", server=receiver.url).ok
    assert set(receiver.one().query) == {"access_token"}


def test_dingtalk_refusing_with_http_200_is_a_failure_without_the_secret(
        receiver: Receiver) -> None:
    receiver.answer = b'{"errcode":310000,"errmsg":"sign not match, tok123 SECabc"}'
    result = send("dingtalk", "tok123:SECabc", server=receiver.url)
    assert not result.ok and result.status == 200
    assert "310000" in result.detail and "sign not match" in result.detail
    assert "tok123" not in result.detail and "SECabc" not in result.detail


def test_feishu_sends_a_text_message_signed_in_its_body(receiver: Receiver) -> None:
    receiver.answer = b'{"code":0,"msg":"success"}'
    result = send("feishu", "hook-uuid-1:fsecret", server=receiver.url)
    assert result.ok, result.detail
    got = receiver.one()
    assert (got.method, got.path) == ("POST", "/open-apis/bot/v2/hook/hook-uuid-1")
    body = got.json
    now_s = NOW_MS // 1000
    assert body["timestamp"] == str(now_s)  # seconds
    # Feishu's check: HMAC-SHA256 keyed by "<timestamp>\n<secret>" over nothing, base64
    key = f"{now_s}\nfsecret".encode()
    assert body["sign"] == base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
    assert body["msg_type"] == "text" and body["content"] == {"text": text_of(document())}


def test_feishu_refusal_and_unsigned_form(receiver: Receiver) -> None:
    receiver.answer = b'{"code":19021,"msg":"sign match fail or timestamp is not within one hour"}'
    result = send("feishu", "hook-uuid-1:fsecret", server=receiver.url)
    assert not result.ok and "19021" in result.detail
    receiver.got.clear()
    receiver.answer = b'{"StatusCode":0,"StatusMessage":"success"}'  # the older answer
    assert send("feishu", "hook-uuid-1", server=receiver.url).ok
    assert set(receiver.one().json) == {"msg_type", "content"}


# --- the other token services ----------------------------------------------------------------


def test_wecom_posts_a_text_message_with_its_key_in_the_query(receiver: Receiver) -> None:
    receiver.answer = b'{"errcode":0,"errmsg":"ok"}'
    assert send("wecom", "key-1", server=receiver.url).ok
    got = receiver.one()
    assert (got.path, got.query) == ("/cgi-bin/webhook/send", {"key": ["key-1"]})
    assert got.json == {"msgtype": "text", "text": {"content": text_of(document())}}
    receiver.answer = b'{"errcode":93000,"errmsg":"invalid webhook url"}'
    assert not send("wecom", "key-1", server=receiver.url).ok


def test_serverchan_posts_title_and_desp_to_its_sendkey(receiver: Receiver) -> None:
    receiver.answer = b'{"code":0,"message":""}'
    assert send("serverchan", "SCT123abc", server=receiver.url).ok
    got = receiver.one()
    doc = document()
    assert got.path == "/SCT123abc.send"
    assert got.json["desp"] == doc["summary"]
    assert len(got.json["title"]) <= 32 and doc["title"].startswith(got.json["title"][:20])
    receiver.answer = b'{"code":40001,"message":"bad pushkey"}'
    assert not send("serverchan", "SCT123abc", server=receiver.url).ok


def test_pushplus_posts_token_title_and_content(receiver: Receiver) -> None:
    receiver.answer = b'{"code":200,"msg":"ok"}'
    assert send("pushplus", "pp-token", server=receiver.url, topic="ops").ok
    got = receiver.one()
    doc = document()
    assert got.path == "/send"
    assert got.json == {"token": "pp-token", "title": doc["title"], "content": doc["summary"],
                        "template": "txt", "topic": "ops"}
    receiver.answer = b'{"code":903,"msg":"invalid token"}'
    result = send("pushplus", "pp-token", server=receiver.url)
    assert not result.ok and "903" in result.detail and "pp-token" not in result.detail


# --- self-hosted: ntfy and Gotify ------------------------------------------------------------


def test_ntfy_posts_the_summary_to_its_topic_with_a_title_header(receiver: Receiver) -> None:
    assert send("ntfy", "tk_access", server=receiver.url, topic="ql-alerts", priority="4").ok
    got = receiver.one()
    doc = document()
    assert (got.method, got.path) == ("POST", "/ql-alerts")
    assert got.headers["Title"] == doc["title"] and got.headers["Priority"] == "4"
    assert got.headers["Authorization"] == "Bearer tk_access"
    assert got.headers["Content-Type"].startswith("text/plain")
    assert got.body.decode() == doc["summary"]
    receiver.got.clear()
    assert send("ntfy", None, server=receiver.url, topic="ql-alerts").ok  # a public topic
    assert "Authorization" not in receiver.one().headers


def test_gotify_posts_a_message_with_the_app_token(receiver: Receiver) -> None:
    assert send("gotify", "app-token", server=receiver.url + "/gotify", priority="8").ok
    got = receiver.one()
    doc = document()
    assert got.path == "/gotify/message" and got.headers["X-Gotify-Key"] == "app-token"
    assert got.json == {"title": doc["title"], "message": doc["summary"], "priority": 8}
    receiver.status, receiver.answer = 401, b'{"error":"Unauthorized"}'
    result = send("gotify", "app-token", server=receiver.url)
    assert not result.ok and result.status == 401


# --- Slack and Discord: the webhook URL is the secret ----------------------------------------


def test_slack_posts_escaped_text_to_the_webhook_url(receiver: Receiver) -> None:
    url = receiver.url + "/services/T000/B000/XXXXXXXXXXXX"
    assert send("slack", url).ok
    got = receiver.one()
    doc = document()
    assert got.path == "/services/T000/B000/XXXXXXXXXXXX"
    assert got.json == {"text": f"*{doc['title']}*\n{doc['summary']}"}
    receiver.status, receiver.answer = 404, b"no_service " + url.encode()
    result = send("slack", url)
    assert not result.ok and url not in result.detail and "XXXXXXXXXXXX" not in result.detail


def test_discord_posts_content_and_pings_nobody(receiver: Receiver) -> None:
    receiver.status, receiver.answer = 204, b""
    assert send("discord", receiver.url + "/api/webhooks/1/abcdefgh").ok
    got = receiver.one()
    doc = document()
    assert got.path == "/api/webhooks/1/abcdefgh"
    assert got.json == {"content": f"**{doc['title']}**\n{doc['summary']}",
                        "allowed_mentions": {"parse": []}}


# --- bad input: clear InvalidInput, never the secret -----------------------------------------


@pytest.mark.parametrize(("service", "params", "field", "words"), [
    ("gotify", {}, "param", "server"),
    ("ntfy", {}, "param", "topic"),
    ("ntfy", {"topic": "a b"}, "param", "topic"),
    ("ntfy", {"topic": "t", "priority": "9"}, "param", "1-5"),
    ("slack", {"server": "https://x"}, "param", "no parameter"),
    ("dingtalk", {"server": "ftp://x"}, "param", "http"),
    ("wecom", {"chat_id": "1"}, "param", "server"),
    ("nope", {}, "service", "dingtalk"),
])
def test_bad_parameters_are_refused_by_name(service: str, params: dict[str, str], field: str,
                                            words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        service_target(service, params)
    assert caught.value.field == field and words in caught.value.rule


# --- through the store, on every database ----------------------------------------------------


def test_a_service_channel_is_stored_without_its_secret_and_test_sent(
        backend: Backend, receiver: Receiver) -> None:
    receiver.answer = b'{"errcode":0}'
    with notify_stores(backend, name="services") as n:
        notifications = Notifications(n.admin, FakeClock(NOW_MS))
        spec = ChannelSpec(name="ding", target=service_target("dingtalk",
                                                              {"server": receiver.url}))
        saved = notifications.save_channel(spec, "tok9:SECnine")
        shown = json.dumps(channel_view(saved.channel).to_json())
        assert "tok9" not in shown and "SECnine" not in shown
        assert json.loads(shown)["service"] == {"service": "dingtalk",
                                                "params": {"server": receiver.url}}
        assert n.admin.channel_get("ding").spec == spec
        sent = notifications.send_test("ding")
        assert sent.delivered, sent.detail
        got = receiver.one()
        assert got.query["access_token"] == ["tok9"] and unquote(got.query["sign"][0])
        assert "notify.test" in got.headers["X-Qinglong-Event"]
        with pytest.raises(InvalidInput) as caught:  # a secret in the wrong shape
            notifications.save_channel(spec, "tok 9", replace=True)
        assert caught.value.field == "secret" and "tok 9" not in caught.value.rule
        with pytest.raises(InvalidInput) as caught:  # dingtalk cannot work without one
            notifications.save_channel(ChannelSpec(name="ding2", target=spec.target), None)
        assert caught.value.field == "secret" and "access token" in caught.value.rule
