"""`ql notify` as a user drives it (in-process, SQLite): channels whose secrets never show,
rules, one-line errors for bad input that write nothing, and `ql notify test` against real
receivers -- a webhook that checks the signature, a small SMTP server, template and preset
channels filled from the event."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.test_cli_errors import Result, assert_one_line_error, dump, ql  # noqa: F401
from tests.support.test_notify_receivers import (
    SmtpReceiver,
    WebhookReceiver,
    independent_signature_ok,
)

HOOK_SECRET = "hook-k3y-never-shown"
TOKEN = "123456:bot-token-never-shown"


@pytest.fixture
def db(ql: Callable[..., Result], tmp_path: Path,  # noqa: F811
       monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Result]]:
    """``ql`` on a migrated database with project demo and task hello."""
    monkeypatch.delenv("QL_DATABASE_URL", raising=False)
    monkeypatch.setenv("HOOK_KEY", HOOK_SECRET)
    monkeypatch.setenv("TG_TOKEN", TOKEN)
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'ql.db'}"

    def run(*argv: str) -> Result:
        return ql(*argv, "--database-url", url)

    for step in (("db", "migrate"), ("project", "create", "demo"),
                 ("task", "publish", "--project", "demo", "--task", "hello", "--shell", "true")):
        done = run(*step)
        assert done.code == 0, done.err
    yield run


def ok(result: Result) -> str:
    assert result.code == 0, result.err
    assert HOOK_SECRET not in result.out + result.err and TOKEN not in result.out + result.err
    return result.out


def test_channels_and_rules_never_print_a_secret(db: Callable[..., Result],
                                                 tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    added = ok(db("notify", "channel", "add", "ops", "--webhook", "https://hooks.example.com/ql",
                  "--secret-env", "HOOK_KEY", "--header", "X-Team: sre"))
    assert added.startswith("added channel ops (webhook https://hooks.example.com/ql, signed")
    ok(db("notify", "channel", "add", "tg", "--preset", "telegram", "--param", "chat_id=-100",
          "--secret-file", str(tmp_path / "token"), "--max-attempts", "3", "--retry-backoff",
          "2s"))
    ok(db("notify", "rule", "add", "--channel", "ops", "--project", "demo"))
    ok(db("notify", "rule", "add", "--channel", "tg", "--project", "demo", "--task", "hello",
          "--events", "failed,cancelled"))
    listed = json.loads(ok(db("notify", "channel", "list", "--json")))
    assert [(c["name"], c["secret"], len(c["rules"])) for c in listed] == [
        ("ops", "set", 1), ("tg", "set", 1)]
    tg = json.loads(ok(db("notify", "channel", "show", "tg", "--json")))
    assert tg["template"]["url"] == "https://api.telegram.org/bot{secret}/sendMessage"
    assert tg["retry"] == {"max_attempts": 3, "backoff_ms": 2000, "max_backoff_ms": 600000}
    assert tg["rules"][0]["events"] == ["failed", "cancelled"]
    for command in (("channel", "list"), ("channel", "show", "ops"), ("channel", "show", "tg"),
                    ("rule", "list"), ("rule", "list", "--json"), ("deliveries",),
                    ("deliveries", "--json")):
        ok(db("notify", *command))
    assert "secret    set" in ok(db("notify", "channel", "show", "ops"))
    rules = json.loads(ok(db("notify", "rule", "list", "--json")))
    assert [(r["channel"], r["task"], r["events"], r["unplaceable_after_ms"]) for r in rules] == [
        ("ops", None, ["failed", "timed_out", "lost", "misfired", "recovered", "unplaceable"],
         300_000),
        ("tg", "hello", ["failed", "cancelled"], None)]
    # the delay of the unplaceable event: shown, changed, kept when not given again
    table = ok(db("notify", "rule", "list")).splitlines()
    assert "UNPLACEABLE AFTER" in table[0]
    assert table[1].split()[:5] == ["ops", "demo", "*",
                                    "failed,timed_out,lost,misfired,recovered,unplaceable", "5m"]
    assert "unplaceable after 5m" in ok(db("notify", "channel", "show", "ops"))
    said = ok(db("notify", "rule", "add", "--channel", "ops", "--project", "demo",
                 "--events", "unplaceable", "--unplaceable-after", "1h30m"))
    assert "unplaceable after 1h30m" in said
    ok(db("notify", "rule", "add", "--channel", "ops", "--project", "demo"))
    [ops] = json.loads(ok(db("notify", "rule", "list", "--channel", "ops", "--json")))
    assert ops["unplaceable_after_ms"] == 5_400_000
    replaced = ok(db("notify", "channel", "add", "ops", "--webhook", "https://b.example.com/",
                     "--replace"))
    assert replaced.startswith("replaced channel ops") and "secret set" in replaced  # kept
    assert json.loads(ok(db("notify", "rule", "remove", "--channel", "tg", "--project", "demo",
                            "--task", "hello", "--events", "cancelled", "--json"))) == {
        "removed": 1}
    assert "removed channel tg" in ok(db("notify", "channel", "remove", "tg"))
    assert [c["name"] for c in json.loads(ok(db("notify", "channel", "list", "--json")))] == [
        "ops"]
    assert json.loads(ok(db("notify", "deliveries", "--json"))) == []


BAD = [
    (("channel", "add", "x", "--webhook", "ftp://h/"), "--webhook"),
    (("channel", "add", "x", "--webhook", "https://u:p@h.example/"), "credentials"),
    (("channel", "add", "X!", "--webhook", "https://h.example/"), "CHANNEL"),
    (("channel", "add", "x", "--webhook", "https://h.example/", "--email"), "exactly one"),
    (("channel", "add", "x"), "exactly one"),
    (("channel", "add", "x", "--email", "--smtp-host", "h"), "--from"),
    (("channel", "add", "x", "--email", "--smtp-host", "h", "--from", "nope", "--to",
      "a@b.example"), "--from"),
    (("channel", "add", "x", "--webhook", "https://h.example/", "--smtp-host", "h"),
     "does not apply"),
    (("channel", "add", "x", "--webhook", "https://h.example/", "--header", "nocolon"),
     "--header"),
    (("channel", "add", "x", "--webhook", "https://h.example/", "--secret-env", "NOPE_UNSET"),
     "NOPE_UNSET"),
    (("channel", "add", "x", "--webhook", "https://h.example/", "--secret-file", "/nonexistent"),
     "--secret-file"),
    (("channel", "add", "x", "--preset", "bark"), "device key"),
    (("channel", "add", "x", "--preset", "telegram", "--secret-env", "TG_TOKEN"), "chat_id"),
    (("channel", "add", "x", "--template", "https://h.example/{nope}"), "{nope}"),
    (("channel", "add", "x", "--template", "https://h.example/", "--body-template", "{bad"),
     "--body-template"),
    (("channel", "add", "x", "--template", "https://h.example/", "--param", "novalue"),
     "--param"),
    (("channel", "add", "x", "--webhook", "https://h.example/", "--max-attempts", "0"),
     "--max-attempts"),
    (("channel", "add", "x", "--webhook", "https://h.example/", "--timeout", "2m"), "--timeout"),
    (("channel", "add", "x", "--webhook", "https://h.example/", "--retry-backoff", "soon"),
     "--retry-backoff"),
    (("channel", "add", "dup", "--webhook", "https://h.example/"), "--replace"),
    (("rule", "add", "--channel", "dup", "--project", "demo", "--events", "faild"), "faild"),
    (("rule", "add", "--channel", "dup", "--project", "demo", "--unplaceable-after", "30s"),
     "--unplaceable-after"),
    (("rule", "add", "--channel", "dup", "--project", "demo", "--unplaceable-after", "soon"),
     "--unplaceable-after"),
    (("rule", "add", "--channel", "dup", "--project", "demo", "--events", "failed",
      "--unplaceable-after", "10m"), "--unplaceable-after"),
    (("rule", "add", "--channel", "dup", "--project", "demo", "--events", "failed",
      "--running-long-after", "10m"), "--running-long-after"),
    (("rule", "add", "--channel", "dup", "--project", "demo", "--events", "late_start",
      "--late-start-after", "30s"), "--late-start-after"),
    (("channel", "add", "x", "--service", "dingtalk"), "access token"),
    (("channel", "add", "x", "--service", "gotify", "--secret-env", "TG_TOKEN"), "server"),
    (("channel", "add", "x", "--service", "ntfy", "--param", "topic=a b"), "--param"),
    (("channel", "add", "x", "--service", "slack", "--secret-env", "HOOK_KEY"),
     "webhook URL"),
    (("channel", "add", "x", "--service", "wecom", "--header", "X: y"), "does not apply"),
    (("channel", "add", "x", "--service", "sms"), "--service"),
    (("rule", "add", "--channel", "nope", "--project", "demo"), "channel 'nope' not found"),
    (("rule", "add", "--channel", "dup", "--project", "nope"), "project 'nope' not found"),
    (("rule", "add", "--channel", "dup", "--project", "demo", "--task", "nope"),
     "task 'demo/nope' not found"),
    (("rule", "remove", "--channel", "dup", "--project", "demo"), "not found"),
    (("channel", "show", "nope"), "channel 'nope' not found"),
    (("channel", "remove", "nope"), "channel 'nope' not found"),
    (("test", "nope"), "channel 'nope' not found"),
    (("retry", "0000dead"), "delivery '0000dead' not found"),
    (("deliveries", "--status", "lost"), "--status"),
]


@pytest.mark.parametrize(("argv", "needle"), BAD, ids=[" ".join(a)[:60] for a, _ in BAD])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(db: Callable[..., Result],
                                                         tmp_path: Path, argv: tuple[str, ...],
                                                         needle: str) -> None:
    ok(db("notify", "channel", "add", "dup", "--webhook", "https://h.example/"))
    before = dump(tmp_path / "ql.db")
    assert_one_line_error(db("notify", *argv), 2, needle)
    assert dump(tmp_path / "ql.db") == before


def test_notify_test_prints_what_the_receiver_answered(db: Callable[..., Result]) -> None:
    receiver = WebhookReceiver(HOOK_SECRET).start()
    try:
        ok(db("notify", "channel", "add", "ops", "--webhook", receiver.url, "--secret-env",
              "HOOK_KEY", "--timeout", "2s"))
        said = ok(db("notify", "test", "ops"))
        assert said.startswith("delivered to ops: HTTP 200 OK (") and "delivery id" in said
        receiver.mode = "error"
        failed = db("notify", "test", "ops")
        assert_one_line_error(failed, 1, "test notification to ops failed: HTTP 503",
                              "receiver says no")
        shown = db("notify", "test", "ops", "--json")
        assert shown.code == 1
        assert json.loads(shown.out)["delivered"] is False
        assert json.loads(shown.out)["status"] == 503
        receiver.stop()
        assert_one_line_error(db("notify", "test", "ops"), 1, "connection refused")
    finally:
        receiver.stop()
    got = receiver.received()
    assert len(got) == 3 and all(r.verified for r in got)
    assert all(independent_signature_ok(HOOK_SECRET, r.headers, r.body) for r in got)
    doc = got[0].document
    assert (doc["event"], doc["channel"], doc["schema"]) == (
        "notify.test", "ops", "qinglong/notification@v1")
    assert got[0].headers["X-Qinglong-Event"] == "notify.test"
    assert len({r.headers["X-Qinglong-Delivery"] for r in got}) == 3  # a new id per test


def test_an_email_channel_sends_through_smtp_and_logs_in_with_its_secret(
        db: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    server = SmtpReceiver(user="ql", password="smtp-pw").start()
    monkeypatch.setenv("SMTP_PW", "smtp-pw")
    try:
        ok(db("notify", "channel", "add", "mail", "--email", "--smtp-host", "127.0.0.1",
              "--smtp-port", str(server.port), "--smtp-security", "none", "--smtp-user", "ql",
              "--from", "ql@example.com", "--to", "a@example.com", "--to", "b@example.com",
              "--secret-env", "SMTP_PW"))
        shown = ok(db("notify", "channel", "show", "mail"))
        assert "smtp-pw" not in shown and "secret    set" in shown
        said = ok(db("notify", "test", "mail", "--json"))
        monkeypatch.setenv("SMTP_PW", "wrong")
        ok(db("notify", "channel", "add", "mail", "--email", "--smtp-host", "127.0.0.1",
              "--smtp-port", str(server.port), "--smtp-security", "none", "--smtp-user", "ql",
              "--from", "ql@example.com", "--to", "a@example.com", "--secret-env", "SMTP_PW",
              "--replace"))
        refused = db("notify", "test", "mail")
    finally:
        server.stop()
    result = json.loads(said)
    assert (result["delivered"], result["status"]) == (True, 250)
    assert_one_line_error(refused, 1, "SMTP 535", "authentication failed")
    assert server.logins == [("ql", "smtp-pw"), ("ql", "wrong")]
    [mail] = server.mails
    assert (mail.sender, mail.recipients) == ("ql@example.com", ["a@example.com", "b@example.com"])
    message = mail.message
    assert message["Subject"] == "qinglong: test notification"
    assert message["Message-ID"] == f"<{result['id']}@qinglong>"
    assert message["X-Qinglong-Delivery"] == result["id"]
    body = message.get_payload(decode=True)
    assert isinstance(body, bytes) and b"it arrived" in body and b'"schema"' in body


def test_templates_and_presets_are_filled_from_the_event(db: Callable[..., Result],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    receiver = WebhookReceiver().start()
    monkeypatch.setenv("BARK_KEY", "device/key?1")
    server = f"http://127.0.0.1:{receiver.port}"
    try:
        ok(db("notify", "channel", "add", "chat", "--template", server + "/room/{channel}",
              "--body-template", '{"text": "{title}", "tags": ["{event}", "{room}"], "n": 1}',
              "--param", "room=7", "--header", "X-Room: {room}"))
        ok(db("notify", "channel", "add", "phone", "--preset", "bark", "--param",
              f"server={server}", "--secret-env", "BARK_KEY"))
        ok(db("notify", "channel", "add", "tg", "--preset", "telegram", "--param",
              f"server={server}", "--param", "chat_id=-100", "--secret-env", "TG_TOKEN"))
        ok(db("notify", "channel", "add", "ping", "--template", server + "/ping?e={event}",
              "--method", "GET"))
        for name in ("chat", "phone", "tg", "ping"):
            ok(db("notify", "test", name))
    finally:
        receiver.stop()
    chat, phone, tg, ping = receiver.received()
    assert chat.path == "/room/chat" and chat.headers["X-Room"] == "7"
    assert chat.document == {"text": "qinglong: test notification",
                             "tags": ["notify.test", "7"], "n": 1}
    assert phone.path == "/push"
    assert phone.document["device_key"] == "device/key?1"  # in the body, so never in a URL
    assert phone.document["group"] == "qinglong"
    assert tg.path == "/bot123456:bot-token-never-shown/sendMessage"
    assert tg.document["chat_id"] == "-100"
    assert tg.document["text"].startswith("qinglong: test notification\n")
    assert (ping.path, ping.body) == ("/ping?e=notify.test", b"")
    assert all(r.headers["X-Qinglong-Delivery"] for r in (chat, phone, tg, ping))
