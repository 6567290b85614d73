"""`ql serve` as a new user met it, each finding reproduced as a test: one server per database
file whatever the path, unusable log directories, log paths that work from anywhere, damaged
databases, and `ql audit` right after a clean stop. Real processes on real files."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.ql import Ql, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def ql(tmp_path: Path) -> Ql:
    work = tmp_path / "work"
    work.mkdir()
    q = Ql(f"sqlite:///{work / 'ql.db'}", cwd=work)
    for step in (("db", "migrate"), ("project", "create", "demo"),
                 ("task", "publish", "--project", "demo", "--task", "hello",
                  "--shell", "echo hello from $QL_RUN_ID")):
        q.run(*step)
    return q


def serve(q: Ql, *extra: str, url: str | None = None, log: Path | None = None
          ) -> subprocess.Popen[str]:
    args = ["serve", "--interval", "250ms", *extra]
    if url is not None:
        args += ["--database-url", url]
    return q.start(*args, stdout=log)


def stop(process: subprocess.Popen[str]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=30)


def test_a_second_server_through_a_symlink_is_refused_and_names_the_first(
        ql: Ql, tmp_path: Path) -> None:
    link = tmp_path / "elsewhere.db"
    link.symlink_to(ql.cwd / "ql.db")
    first = serve(ql)
    try:
        lock = ql.cwd / "ql.db.serve.lock"
        wait_for(lambda: lock.exists() and lock.read_text().strip() == str(first.pid), 10,
                 "the first server's lock (its pid written in it)")
        second = ql.run("serve", "--database-url", f"sqlite:///{link}", "--duration", "2s",
                        check=False)
        assert second.returncode == 4, second.stderr
        assert f"(pid {first.pid})" in second.stderr
        assert first.poll() is None  # the first server was not disturbed
    finally:
        assert stop(first) == 0


def test_a_database_with_two_hard_links_is_refused(ql: Ql, tmp_path: Path) -> None:
    os.link(ql.cwd / "ql.db", tmp_path / "hard.db")
    done = ql.run("serve", "--database-url", f"sqlite:///{tmp_path / 'hard.db'}",
                  "--duration", "1s", check=False)
    assert done.returncode == 2
    assert "2 hard links" in done.stderr and len(done.stderr.splitlines()) == 1


def test_an_unusable_log_directory_is_one_clear_line(ql: Ql) -> None:
    done = ql.run("serve", "--log-dir", "/proc/nope", "--duration", "1s", check=False)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "ql: --log-dir: cannot write log files in '/proc/nope' (No such file or directory)"]
    assert "Traceback" not in done.stdout + done.stderr


def test_logs_are_found_from_any_directory(ql: Ql, tmp_path: Path) -> None:
    relative = Ql("sqlite:///ql.db", cwd=ql.cwd)  # the database named relative to cwd
    relative.run("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "hello",
                 "--cron", "* * * * * *", "--timezone", "UTC")
    server = relative.start("serve", "--interval", "250ms", "--log-dir", "logs")
    try:
        wait_for(lambda: relative.json("run", "list", "--status", "succeeded"), 20,
                 "a succeeded run")
    finally:
        assert stop(server) == 0
    [run] = relative.json("run", "list", "--status", "succeeded", "--limit", "1")
    elsewhere = Ql(f"sqlite:///{ql.cwd / 'ql.db'}", cwd=tmp_path)
    shown = elsewhere.json("run", "show", run["id"])
    assert Path(shown["attempts"][0]["log_path"]).is_absolute()
    assert shown["log"]["readable"] is True
    assert shown["log_tail"] == [f"hello from {run['id']}"]


def corrupt(path: Path) -> None:
    """Overwrite every page after the first with garbage (the header stays readable)."""
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.seek(4096)
        handle.write(b"\xa5" * (size - 4096))


def test_a_damaged_database_is_reported_by_every_command_and_stops_serve(ql: Ql) -> None:
    ql.run("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "hello",
           "--cron", "* * * * * *", "--timezone", "UTC")
    corrupt(ql.cwd / "ql.db")
    check = ql.run("db", "check", check=False)
    assert check.returncode == 3 and "integrity:" in check.stdout
    listed = ql.run("task", "list", "--project", "demo", check=False)
    assert listed.returncode != 0
    assert "malformed" in listed.stderr or "not a database" in listed.stderr
    # an hour to serve: only the damage can end it within the wait (a TimeoutExpired if not)
    served = ql.run("serve", "--interval", "250ms", "--duration", "1h", check=False, timeout=120)
    assert served.returncode != 0
    assert "QL_DATABASE_CORRUPT" in served.stderr or "damaged" in served.stderr


def test_serve_stops_when_the_scheduler_finds_damage_at_run_time(ql: Ql) -> None:
    ql.run("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "hello",
           "--cron", "* * * * * *", "--timezone", "UTC")
    path = ql.cwd / "ql.db"
    with sqlite3.connect(path) as conn:  # damage only the schedule table: the schema is fine
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        [root] = conn.execute("SELECT rootpage FROM sqlite_master "
                              "WHERE name = 'trigger_schedules'").fetchone()
    with path.open("r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(b"\xa5" * page_size)
    # an hour to serve: only the damage can end it within the wait (a TimeoutExpired if not)
    served = ql.run("serve", "--interval", "250ms", "--duration", "1h", check=False, timeout=120)
    assert served.returncode == 1, served.stderr
    assert served.stderr.strip().splitlines()[-1].startswith("ql: stopped: ")
    assert "malformed" in served.stderr


def test_audit_right_after_a_clean_stop_judges_only_what_was_decided(ql: Ql) -> None:
    ql.run("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "hello",
           "--cron", "* * * * * *", "--timezone", "UTC")
    server = serve(ql)
    try:
        wait_for(lambda: len(ql.json("run", "list", "--limit", "10")) >= 3, 20, "three runs")
    finally:
        assert stop(server) == 0
    stopped_ms = int(time.time() * 1000)
    # Occurrences fall due with nobody serving, for longer than the settle: a window that
    # ended now would require at least two of them (the last decision came before the stop,
    # then 1 s of settle and two whole seconds) and report them as unexplained gaps.
    while time.time() * 1000 < stopped_ms + 3_500:
        time.sleep(0.05)
    done = ql.run("audit", "--json", "--settle", "1s", check=False)
    assert done.returncode == 0, done.stdout
    report = json.loads(done.stdout)
    assert report["ok"] is True and report["totals"]["gaps_unexplained"] == 0
    assert report["totals"]["admitted"] == report["totals"]["expected"] >= 2
    assert report["window"]["to_source"] == "stop"
    assert report["window"]["to_ms"] <= stopped_ms + 500  # (wall clock and database agree)
    assert any("no scheduler is running" in note for note in report["notes"])
