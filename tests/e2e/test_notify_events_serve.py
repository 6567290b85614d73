"""The opt-in notification events through the CLI with real processes (issue 22, item 5): a
DingTalk channel (`--service dingtalk`, its secret ACCESS_TOKEN:SIGNING_SECRET) at a local
receiver that recomputes every signature, a rule for started, succeeded, running_long and
late_start with one-minute delays, and a `ql serve` that runs a quick task, a long one, and
one that requires a label no worker offers. Rather than wait the minutes, the test makes the
long Run's attempt and the waiting Run two minutes older in the database file (the serve
judges them against its own clock, so this is the same as the time passing). Each event
arrives once, signed, and `ql notify deliveries` lists them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.contract.test_notify_services import Got, Receiver
from tests.support.ql import Ql, wait_for

pytestmark = pytest.mark.slow

TOKEN, SIGNING = "ding-access-token", "SECding-signing-secret"


def signed(got: Got) -> bool:
    """DingTalk's check, written from its documentation: base64 HMAC-SHA256 keyed by the
    signing secret over "<timestamp ms>\\n<secret>", here against the query it received."""
    timestamp = got.query["timestamp"][0]
    expected = base64.b64encode(hmac.new(SIGNING.encode(), f"{timestamp}\n{SIGNING}".encode(),
                                         hashlib.sha256).digest()).decode()
    return got.query["access_token"] == [TOKEN] and got.query["sign"] == [expected]


def texts(receiver: Receiver) -> list[str]:
    return [str(got.json["text"]["content"]).split("\n", 1)[0] for got in receiver.got]


def test_serve_sends_starts_successes_and_deadlines_to_dingtalk_once(tmp_path: Path) -> None:
    db = tmp_path / "ql.db"
    ql = Ql(f"sqlite:///{db}", cwd=tmp_path, env={"DING": f"{TOKEN}:{SIGNING}"})
    receiver = Receiver()
    receiver.answer = b'{"errcode":0,"errmsg":"ok"}'
    server: subprocess.Popen[str] | None = None
    try:
        ql.run("db", "migrate")
        ql.run("project", "create", "demo")
        ql.run("task", "publish", "--project", "demo", "--task", "quick", "--shell", "echo ok")
        ql.run("task", "publish", "--project", "demo", "--task", "long", "--shell", "sleep 300")
        ql.run("task", "publish", "--project", "demo", "--task", "us", "--shell", "echo us",
               "--requires", "region=us")
        added = ql.run("notify", "channel", "add", "ding", "--service", "dingtalk", "--param",
                       f"server={receiver.url}", "--secret-env", "DING").stdout
        assert added.startswith("added channel ding (service dingtalk") and TOKEN not in added
        ql.run("notify", "rule", "add", "--channel", "ding", "--project", "demo", "--events",
               "started,succeeded,running_long,late_start", "--running-long-after", "1m",
               "--late-start-after", "1m")
        listed = ql.run("notify", "rule", "list").stdout
        assert "RUNNING LONG AFTER" in listed and "LATE START AFTER" in listed
        [made] = ql.json("notify", "rule", "list")
        assert (made["running_long_after_ms"], made["late_start_after_ms"]) == (60_000, 60_000)
        quick = ql.json("task", "run", "--project", "demo", "--task", "quick")["id"]
        long = ql.json("task", "run", "--project", "demo", "--task", "long")["id"]
        waiting = ql.json("task", "run", "--project", "demo", "--task", "us")["id"]
        server = ql.start("serve", "--interval", "250ms", stdout=tmp_path / "serve.log")
        wait_for(lambda: ql.json("run", "show", quick)["run"]["status"] == "succeeded", 60,
                 "the quick Run", interval=0.25)
        wait_for(lambda: ql.json("run", "show", long)["run"]["status"] == "running", 60,
                 "the long Run to run", interval=0.25)
        wait_for(lambda: len(receiver.got) >= 3, 30, "started x2 and succeeded", interval=0.25)
        assert sorted(texts(receiver)) == ["qinglong: demo/long started",
                                           "qinglong: demo/quick started",
                                           "qinglong: demo/quick succeeded"]
        with sqlite3.connect(db, timeout=30) as conn:
            conn.execute("UPDATE runs SET started_at_ms = started_at_ms - 120000 WHERE id = ?",
                         (long,))
            conn.execute("UPDATE runs SET created_at_ms = created_at_ms - 120000, "
                         "queued_at_ms = queued_at_ms - 120000, "
                         "scheduled_for_ms = scheduled_for_ms - 120000 WHERE id = ?", (waiting,))
        # the walks look every 15 s while such a Run has waited long enough
        wait_for(lambda: len(receiver.got) >= 5, 45, "running_long and late_start",
                 interval=0.25)
        assert sorted(texts(receiver)[3:]) == ["qinglong: demo/long still running",
                                               "qinglong: demo/us has not started"]
        assert all(signed(got) for got in receiver.got)
        wait_for(lambda: all(d["status"] == "delivered"
                             for d in ql.json("notify", "deliveries")), 30, "them recorded")
        events = sorted((d["event"], d["run"]) for d in ql.json("notify", "deliveries"))
        assert events == sorted([("run.started", quick), ("run.succeeded", quick),
                                 ("run.started", long), ("run.running_long", long),
                                 ("run.late_start", waiting)])
        tested = ql.run("notify", "test", "ding").stdout
        assert tested.startswith("delivered to ding: HTTP 200") and TOKEN not in tested
        server.send_signal(signal.SIGTERM)
        assert server.wait(60) == 0
        server = None
    finally:
        receiver.close()
        if server is not None and server.poll() is None:
            server.send_signal(signal.SIGTERM)
            server.wait(60)
    assert len(ql.json("notify", "deliveries")) == 5  # each once
