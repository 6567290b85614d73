"""The unplaceable notification with real processes (issue 21, item 2): a `ql serve` (SQLite)
offers no labels, so a Run of a task that `--requires region=us` stays queued; a rule asks
for `unplaceable` after 1 minute. Rather than wait that minute, the test makes the queued
Run two minutes older in the database file (what the serve judges against is its own clock,
so this is the same as the time passing). A signed `run.unplaceable` document for that Run
arrives at a real webhook receiver, exactly once, and `ql notify deliveries` shows it; the
Runs that require nothing ran meanwhile and were never reported."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.support.ql import Ql, wait_for
from tests.support.test_notify_receivers import WebhookReceiver, independent_signature_ok

pytestmark = pytest.mark.slow

HOOK_SECRET = "unplaceable-hmac-k3y"


def test_serve_reports_a_run_no_worker_can_take_once(tmp_path: Path) -> None:
    db = tmp_path / "ql.db"
    ql = Ql(f"sqlite:///{db}", cwd=tmp_path, env={"HOOK_KEY": HOOK_SECRET})
    receiver = WebhookReceiver(HOOK_SECRET).start()
    server: subprocess.Popen[str] | None = None
    try:
        ql.run("db", "migrate")
        ql.run("project", "create", "demo")
        ql.run("task", "publish", "--project", "demo", "--task", "us", "--shell", "echo us",
               "--requires", "region=us")
        ql.run("task", "publish", "--project", "demo", "--task", "plain", "--shell", "echo ok")
        ql.run("notify", "channel", "add", "ops", "--webhook", receiver.url, "--secret-env",
               "HOOK_KEY")
        ql.run("notify", "rule", "add", "--channel", "ops", "--project", "demo",
               "--unplaceable-after", "1m")  # the default events: unplaceable among them
        waiting = ql.json("task", "run", "--project", "demo", "--task", "us")["id"]
        plain = ql.json("task", "run", "--project", "demo", "--task", "plain")["id"]
        server = ql.start("serve", "--interval", "250ms", stdout=tmp_path / "serve.log")
        wait_for(lambda: ql.json("run", "show", plain)["run"]["status"] == "succeeded", 60,
                 "the Run that requires nothing to run", interval=0.25)
        assert ql.json("run", "show", waiting)["run"]["status"] == "queued"
        assert receiver.received() == []  # not before its minute
        with sqlite3.connect(db, timeout=30) as conn:
            conn.execute("UPDATE runs SET queued_at_ms = queued_at_ms - 120000 WHERE id = ?",
                         (waiting,))
        # the dispatcher looks every 15 s while such a Run has waited long enough
        wait_for(lambda: receiver.received(), 40, "the unplaceable notification", interval=0.25)
        [got] = receiver.received()
        document = got.document
        assert document["event"] == "run.unplaceable" and document["run"]["id"] == waiting
        assert document["placement"]["requires"] == ["region=us"]
        assert document["placement"]["reason"] == "no live worker offers region=us"
        assert document["placement"]["after_ms"] == 60_000
        assert got.verified and independent_signature_ok(HOOK_SECRET, got.headers, got.body)
        wait_for(lambda: all(d["status"] == "delivered"
                             for d in ql.json("notify", "deliveries")), 30, "it to be recorded")
        [delivery] = ql.json("notify", "deliveries")
        assert (delivery["event"], delivery["run"]) == ("run.unplaceable", waiting)
        assert ql.json("run", "show", waiting)["run"]["status"] == "queued"
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0
        server = None
    finally:
        receiver.stop()
        if server is not None and server.poll() is None:
            server.send_signal(signal.SIGTERM)
            server.wait(30)
    assert len(ql.json("notify", "deliveries")) == 1
    assert len(receiver.received()) == 1
