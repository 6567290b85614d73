"""`ql serve` runs Runs on the same lifecycle as the cluster workers: retries as durable
state, `ql run logs --follow` across attempts, `ql run cancel` of a running Run, overlap
`skip`, the global limit, and `ql audit` judging the execution. Real processes, SQLite."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.ql import Ql, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def ql(tmp_path: Path) -> Ql:
    q = Ql(f"sqlite:///{tmp_path / 'ql.db'}", cwd=tmp_path)
    q.run("db", "migrate")
    q.run("project", "create", "demo")
    return q


def stop(process: subprocess.Popen[str]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=30)


def test_a_failing_task_is_retried_and_followed_across_its_attempts(ql: Ql, tmp_path: Path) -> None:
    go = tmp_path / "go"  # the first attempt ends only once the follow is attached
    ql.run("task", "publish", "--project", "demo", "--task", "flaky", "--shell",
           f"echo try $QL_ATTEMPT; [ $QL_ATTEMPT -gt 1 ] || until [ -e {go} ]; do sleep 0.1; "
           "done; sleep 1; exit 3", "--max-attempts", "3", "--retry-backoff", "500ms",
           "--retry-on-exit", "3")
    ql.run("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "flaky",
           "--cron", "* * * * * *", "--timezone", "UTC")
    server = ql.start("serve", "--interval", "250ms")
    out_path, err_path = tmp_path / "follow.out", tmp_path / "follow.err"
    try:
        [first] = wait_for(lambda: ql.json("run", "list", "--oldest-first", "--limit", "1"), 20,
                           "a first run")
        ql.run("trigger", "disable", "--project", "demo", "--trigger", "t1")
        with out_path.open("w") as out, err_path.open("w") as err:
            follow = subprocess.Popen(ql.command("run", "logs", first["id"], "--follow"),
                                      cwd=ql.cwd, env=ql.env, text=True, stdout=out, stderr=err)
        try:
            wait_for(lambda: out_path.read_text().startswith("try 1\n"), 30, "the follow")
            go.touch()
            follow.wait(timeout=60)
        finally:
            if follow.poll() is None:
                follow.kill()
                follow.wait()
    finally:
        assert stop(server) == 0
    shown = ql.json("run", "show", first["id"])
    # Following the latest attempt moves on with each retry.
    whole = ["try 1", "", "[qinglong: attempt 2]", "try 2", "", "[qinglong: attempt 3]",
             "try 3", ""]
    assert follow.returncode == 0, err_path.read_text()
    assert out_path.read_text().split("\n") == whole, shown
    shown = ql.json("run", "show", first["id"])
    assert shown["run"]["status"] == "failed"
    assert [a["status"] for a in shown["attempts"]] == ["failed", "failed", "failed"]
    assert "run.retry_wait" in [e["type"] for e in shown["events"]]
    assert ql.run("run", "logs", first["id"], "--attempt", "2").stdout == "try 2\n"
    refused = ql.run("run", "logs", first["id"], "--attempt", "9", check=False)
    assert refused.returncode == 2 and "attempts 1 to 3" in refused.stderr
    audit = ql.json("audit", "--settle", "1s")
    assert audit["ok"] and audit["execution"]["retried"] >= 1, audit


def test_cancel_stops_a_running_command_within_a_second_or_two(ql: Ql) -> None:
    ql.run("task", "publish", "--project", "demo", "--task", "slow", "--shell",
           "trap '' TERM; sleep 30", "--max-attempts", "3")
    ql.run("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "slow",
           "--cron", "* * * * * *", "--timezone", "UTC", "--overlap", "skip")
    server = ql.start("serve", "--interval", "250ms")
    try:
        [running] = wait_for(lambda: ql.json("run", "list", "--status", "running"), 20,
                             "a running run")
        wait_for(lambda: ql.json("run", "list", "--status", "cancelled"), 20,
                 "an occurrence skipped by the overlap policy")
        ql.run("run", "cancel", running["id"])
        # the command ignores SIGTERM: it is killed after the grace
        wait_for(lambda: ql.json("run", "show", running["id"])["run"]["status"] == "cancelled",
                 10, "the run to be cancelled")
        ql.run("trigger", "disable", "--project", "demo", "--trigger", "t1")
        again = ql.run("run", "cancel", running["id"], check=False)
    finally:
        assert stop(server) == 0
    assert again.returncode == 2 and "already ended" in again.stderr
    shown = ql.json("run", "show", running["id"])
    assert [a["status"] for a in shown["attempts"]] == ["cancelled"]  # never retried
    skipped = [r for r in ql.json("run", "list", "--status", "cancelled") if r["id"] != running["id"]]
    assert skipped, "the overlap policy skipped no occurrence"
    audit = ql.json("audit", "--settle", "1s")
    assert audit["ok"], audit
