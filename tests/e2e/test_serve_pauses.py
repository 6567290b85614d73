"""`ql trigger pause` / `resume` against a running `ql serve` (real processes, SQLite): a paused
trigger runs nothing, lists show why and until when, a resume runs the occurrence in progress,
a timed pause ends by itself, and `ql audit` explains every held-back occurrence."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.ql import Ql, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def ql(tmp_path: Path) -> Ql:
    q = Ql(f"sqlite:///{tmp_path / 'ql.db'}", cwd=tmp_path)
    q.run("db", "migrate")
    q.run("project", "create", "demo")
    q.run("task", "publish", "--project", "demo", "--task", "hello", "--shell", "echo hi")
    q.run("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "hello",
          "--cron", "* * * * * *", "--timezone", "UTC")
    return q


def stop(process: subprocess.Popen[str]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=30)


def scheduled(ql: Ql) -> list[int]:
    return sorted(r["scheduled_for_ms"] for r in ql.json("run", "list", "--limit", "1000"))


def test_pause_and_resume_under_a_running_server(ql: Ql) -> None:
    server = ql.start("serve", "--interval", "250ms")
    try:
        wait_for(lambda: len(scheduled(ql)) >= 2, 20, "the trigger to run")
        paused = ql.json("trigger", "pause", "--project", "demo", "--trigger", "t1",
                         "--reason", "db upgrade", "--actor", "alice")
        assert paused["state"] == "paused" and paused["pause"]["reason"] == "db upgrade"
        assert paused["pause"]["until"] is None and paused["next_fire_at"] == []
        since = paused["pause"]["since_ms"]
        listed = ql.run("trigger", "list", "--project", "demo").stdout
        assert "paused (db upgrade)" in listed
        # three and a half seconds of occurrences fall in the pause (by the clock the pause was
        # recorded with: this machine's)
        while time.time() * 1000 < since + 3_500:
            time.sleep(0.05)
        during = [t for t in scheduled(ql) if t > since]
        resumed = ql.json("trigger", "resume", "--project", "demo", "--trigger", "t1")
        assert resumed["state"] == "firing" and resumed["pause"] is None
        after = wait_for(lambda: [t for t in scheduled(ql) if t > since + 3_000], 20,
                         "runs after the resume")
        timed = ql.json("trigger", "pause", "--project", "demo", "--trigger", "t1",
                        "--until", "2s")
        until = timed["pause"]["until_ms"]
        wait_for(lambda: [t for t in scheduled(ql) if t >= until], 20,
                 "the timed pause to end by itself")
    finally:
        assert stop(server) == 0
    assert during == [], "a paused trigger ran"
    assert after  # the occurrence in progress at the resume, then the ones after it
    refused = ql.run("trigger", "resume", "--project", "demo", "--trigger", "t1", check=False)
    assert refused.returncode != 0 and "not paused" in refused.stderr
    report = ql.json("audit", "--settle", "1s")
    assert report["ok"], report
    [trigger] = report["triggers"]
    # What the pauses held back: each second from the first pause to the end of the timed one
    # that has no Run. The pause by hand lasted over 3.5 s, so it held at least three seconds,
    # of which the resume ran at most one (the occurrence in progress); how many the two held
    # in all depends on how long this machine took between the commands.
    ran = set(scheduled(ql))
    held = [s for s in range(since - since % 1000 + 1000, until, 1000) if s not in ran]
    assert len(held) >= 2, (since, until, sorted(ran))
    assert trigger["gaps_explained"]["paused"] == len(held), (held, trigger)
    assert trigger["pause_violations"] == []


def test_bad_pause_input_is_a_clear_error(ql: Ql) -> None:
    for args, text in [
        (["--until", "yesterday"], "not an RFC 3339 time"),
        (["--until", "2020-01-01T00:00:00Z"], "later than now"),
        (["--reason", ""], "reason"),
    ]:
        result = ql.run("trigger", "pause", "--project", "demo", "--trigger", "t1", *args,
                        check=False)
        assert result.returncode != 0 and text in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
    missing = ql.run("trigger", "pause", "--project", "demo", "--trigger", "nope", check=False)
    assert missing.returncode != 0 and "nope" in missing.stderr
    shown = ql.json("trigger", "list", "--project", "demo")
    assert shown[0]["state"] == "firing" and shown[0]["pause"] is None
