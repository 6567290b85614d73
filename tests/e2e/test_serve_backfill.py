"""`ql trigger backfill` beside a running `ql serve` (real processes, SQLite): a per-second
trigger is paused and resumed, the stretch the pause held back is backfilled (a Ctrl-C stops
the first attempt between two admissions, running it again carries on), `ql serve` runs the
backfilled Runs, every occurrence then has exactly one Run, and `ql audit` is clean with the
backfilled occurrences explained."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.ql import Ql, wait_for

pytestmark = pytest.mark.slow

BACKFILL = ("trigger", "backfill", "--project", "demo", "--trigger", "t1")


@pytest.fixture
def ql(tmp_path: Path) -> Ql:
    q = Ql(f"sqlite:///{tmp_path / 'ql.db'}", cwd=tmp_path, env={"QL_ACTOR": "alice"})
    q.run("db", "migrate")
    q.run("project", "create", "demo")
    q.run("task", "publish", "--project", "demo", "--task", "hello", "--shell", "echo hi")
    q.run("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "hello",
          "--cron", "* * * * * *", "--timezone", "UTC")
    return q


def runs(ql: Ql) -> list[dict[str, object]]:
    listed = ql.json("run", "list", "--limit", "10000")
    assert isinstance(listed, list)
    return listed


def backfilled_in(db: Path) -> int:
    """Backfilled Runs, read straight from the SQLite file (read-only, no ``ql`` process)."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as conn:
        [(count,)] = conn.execute(
            "SELECT count(*) FROM runs WHERE trigger_type = 'backfill'").fetchall()
    return int(count)


def cursor(ql: Ql) -> int:
    [t1] = ql.json("trigger", "list", "--project", "demo")
    return int(t1["cursor_ms"])


def test_backfill_the_stretch_a_pause_held_back(ql: Ql, tmp_path: Path) -> None:
    server = ql.start("serve", "--interval", "250ms")
    try:
        wait_for(lambda: len(runs(ql)) >= 2, 20, "the trigger to run")
        paused = ql.json("trigger", "pause", "--project", "demo", "--trigger", "t1")
        since = int(paused["pause"]["since_ms"])
        # six seconds of occurrences fall in the pause (by the clock the pause was recorded
        # with: this machine's)
        while time.time() * 1000 < since + 6_000:
            time.sleep(0.05)
        ql.run("trigger", "resume", "--project", "demo", "--trigger", "t1")
        resumed = int(time.time() * 1000)  # at or after the resume (same clock as ql's)
        # the occurrence in progress at the resume is decided first; then the cursor is past it
        wait_for(lambda: cursor(ql) > resumed, 20, "the scheduler to decide past the resume")
        held = list(range(-(-since // 1000) * 1000, resumed + 1, 1000))  # the window's

        refused = ql.run(*BACKFILL, "--from", str(since), "--to", str(cursor(ql) + 3_600_000),
                         check=False)
        assert refused.returncode == 2 and "--to: must be before" in refused.stderr, refused.stderr
        assert "cursor" in refused.stderr and "Traceback" not in refused.stderr

        dry = ql.json(*BACKFILL, "--from", str(since), "--to", str(resumed), "--dry-run")
        assert dry["dry_run"] is True and dry["occurrences"] == len(held)
        missing = dry["to_admit_ms"]
        assert len(missing) >= 4 and set(missing) < set(held)  # L ran at the resume

        # Ctrl-C after the second admission (one a second): it stops between two admissions
        first = subprocess.Popen(ql.command(*BACKFILL, "--from", str(since), "--to",
                                            str(resumed), "--rate", "1"),
                                 cwd=ql.cwd, env=ql.env, text=True, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        # read the database file itself: a `ql run list` per look can take a second or two
        # on a loaded machine, long enough for the backfill to finish
        wait_for(lambda: backfilled_in(tmp_path / "ql.db") >= 2, 20, "two backfilled runs",
                 interval=0.02)
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=30)
        assert first.returncode == 130, (out, err)
        assert "interrupted: demo/t1: admitted " in out and "Run the same command again" in out
        stopped_at = sum(r["trigger_type"] == "backfill" for r in runs(ql))
        assert 2 <= stopped_at < len(missing)

        done = ql.run(*BACKFILL, "--from", str(since), "--to", str(resumed), "--rate", "50")
        lines = done.stdout.splitlines()
        assert lines[0].startswith("backfill demo/t1 (revision 1: '* * * * * *' in UTC)")
        assert lines[-1].startswith(
            f"backfilled demo/t1: admitted {len(missing) - stopped_at}, already had a Run "
            f"{len(held) - len(missing) + stopped_at}, skipped 0")
        again = ql.json(*BACKFILL, "--from", str(since), "--to", str(resumed))
        assert (again["admitted"], again["already_had_run"], again["state"]) == (
            0, len(held), "done")
        wait_for(lambda: all(r["status"] == "succeeded" for r in runs(ql)
                             if r["trigger_type"] == "backfill"), 20,
                 "ql serve to run the backfilled runs")
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    every = runs(ql)
    backfilled = [r for r in every if r["trigger_type"] == "backfill"]
    assert sorted(int(str(r["scheduled_for_ms"])) for r in backfilled) == missing
    assert {(r["origin"], r["requested_by"], r["admission_lag_ms"]) for r in backfilled} == {
        ("backfill_user", "alice", None)}
    # every occurrence from the first Run to the last has exactly one Run
    instants = Counter(int(str(r["scheduled_for_ms"])) for r in every)
    assert set(instants.values()) == {1}
    assert sorted(instants) == list(range(min(instants), max(instants) + 1, 1000))
    listed = ql.run("run", "list", "--trigger", "t1", "--limit", "10000").stdout
    assert "backfill:alice" in listed
    report = ql.json("audit", "--settle", "1s")
    assert report["ok"], json.dumps(report, indent=1)
    [t1] = report["triggers"]
    assert t1["gaps_explained"]["backfilled"] == len(missing)
    assert (t1["duplicates"], t1["spurious"], t1["gaps_unexplained"]) == (0, [], [])
    assert report["execution"]["runs"] == len(every)


def test_bad_backfill_input_is_a_clear_error_and_writes_nothing(ql: Ql) -> None:
    for args, text in [
        (["--from", "yesterday", "--to", "1h"], "not an RFC 3339 time"),
        (["--from", "2h", "--to", "3h"], "--from: must not be after --to"),
        (["--from", "1h", "--to", "0s", "--rate", "0"], "--rate"),
        (["--to", "1h"], "--from"),
    ]:
        result = ql.run(*BACKFILL, *args, check=False)
        assert result.returncode == 2 and text in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
    [t1] = ql.json("trigger", "list", "--project", "demo")
    published = int(t1["published_at_ms"])
    nothing_decided = ql.run(*BACKFILL, "--from", str(published), "--to", str(published + 1),
                             check=False)
    assert nothing_decided.returncode == 2
    assert "has not decided an occurrence" in nothing_decided.stderr
    missing = ql.run("trigger", "backfill", "--project", "demo", "--trigger", "nope",
                     "--from", "1h", "--to", "0s", check=False)
    assert missing.returncode == 2 and "nope" in missing.stderr
    assert runs(ql) == []
    shown = ql.run(*BACKFILL[:2], "--help").stdout
    assert "--dry-run" in shown and "--rate" in shown and "cursor" in shown
