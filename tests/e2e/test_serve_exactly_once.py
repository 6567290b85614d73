"""`ql serve` as a user runs it: exactly one Run per second, and a crash with kill -9."""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path

import pytest

from tests.support.processes import process_running
from tests.support.ql import Ql, wait_for

pytestmark = pytest.mark.slow


def db_rows(path: Path, sql: str, *params: object) -> list[sqlite3.Row]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def runs_of(path: Path, trigger: str) -> list[sqlite3.Row]:
    return db_rows(
        path,
        "SELECT r.id, r.scheduled_for_ms, r.status, r.created_at_ms, a.exit_code, a.status AS a_status "
        "FROM runs r JOIN run_attempts a ON a.run_id = r.id WHERE r.trigger_id = ? "
        "ORDER BY r.scheduled_for_ms",
        trigger,
    )


@pytest.fixture
def ql(tmp_path: Path) -> tuple[Ql, Path]:
    path = tmp_path / "ql.db"
    cli = Ql(f"sqlite:///{path}", tmp_path)
    cli.run("db", "migrate")
    cli.run("project", "create", "demo")
    return cli, path


@pytest.mark.parametrize("seconds", [
    15,  # `make test`
    pytest.param(30, marks=pytest.mark.long),  # `make test-long`: the same at twice the length
], ids=["15s", "30s"])
def test_seconds_of_a_per_second_trigger_admit_each_second_exactly_once(
        ql: tuple[Ql, Path], seconds: int) -> None:
    cli, path = ql
    cli.run("task", "publish", "--project", "demo", "--task", "hello", "--shell", "echo $QL_SCHEDULED_FOR")
    cli.run("trigger", "publish", "--project", "demo", "--trigger", "every-second", "--task", "hello",
            "--cron", "* * * * * *", "--timezone", "UTC", "--misfire", "skip")
    published = cli.json("trigger", "list", "--project", "demo")[0]["published_at_ms"]
    serve = cli.start("serve", stdout=path.with_suffix(".out"))
    wait_for(lambda: len(db_rows(path, "SELECT 1 FROM runs WHERE trigger_id = 'every-second'"))
             >= seconds, seconds + 60, f"{seconds} seconds' occurrences admitted", interval=0.5)
    stop_ms = time.time_ns() // 1_000_000
    serve.send_signal(signal.SIGTERM)
    assert serve.wait(timeout=30) == 0
    output = path.with_suffix(".out").read_text()
    assert "Traceback" not in output
    rows = runs_of(path, "every-second")
    scheduled = [r["scheduled_for_ms"] for r in rows]
    first_expected = -(-published // 1000) * 1000  # first whole second at or after publishing
    assert scheduled[0] == first_expected
    assert scheduled == list(range(scheduled[0], scheduled[-1] + 1, 1000)), "a gap or a duplicate"
    assert scheduled[-1] >= stop_ms - 2000
    assert len(scheduled) >= seconds
    for row in rows:
        assert (row["status"], row["a_status"], row["exit_code"]) == ("succeeded", "succeeded", 0)
    listed = cli.json("run", "list", "--project", "demo", "--trigger", "every-second", "--limit", "1000")
    assert sorted(r["scheduled_for_ms"] for r in listed) == scheduled


def test_kill_minus_nine_then_restart_follows_each_misfire_policy(ql: tuple[Ql, Path]) -> None:
    cli, path = ql
    cli.run("task", "publish", "--project", "demo", "--task", "quick", "--argv", "/bin/true")
    cli.run("task", "publish", "--project", "demo", "--task", "long", "--shell", "sleep 60")
    for trigger, task, policy in (("t-skip", "quick", "skip"), ("t-fire", "quick", "fire_once"),
                                  ("t-long", "long", "skip")):
        cli.run("trigger", "publish", "--project", "demo", "--trigger", trigger, "--task", task,
                "--cron", "* * * * * *", "--timezone", "UTC", "--misfire", policy)
    serve_args = ("serve", "--grace", "2s", "--concurrency", "4", "--drain-timeout", "500ms")
    first = cli.start(*serve_args, stdout=path.with_suffix(".out1"))
    wait_for(lambda: len(db_rows(path, "SELECT 1 FROM runs WHERE trigger_id='t-long' AND status='running'")) >= 2,
             20, "long runs to be executing")
    time.sleep(1.2)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    # the long commands running at the kill (a quick /bin/true can be caught running too,
    # but its Run is not one of the long ones counted below)
    orphans = [r["pid"] for r in db_rows(
        path, "SELECT a.pid FROM run_attempts a JOIN runs r ON r.id = a.run_id "
              "WHERE a.status = 'running' AND r.trigger_id = 't-long'")]
    assert orphans, "something must have been running at the kill"
    before = {t: [r["scheduled_for_ms"] for r in runs_of(path, t)] for t in ("t-skip", "t-fire")}
    time.sleep(5)  # downtime well beyond the 2 s grace
    restart_ms = time.time_ns() // 1_000_000
    second = cli.start(*serve_args, stdout=path.with_suffix(".out2"))

    def caught_up() -> bool:
        # each trigger decided its misfire after the restart, and the quick ones admitted
        # past the grace since (waited for: a fixed sleep could end before a slow start)
        decided = {r["trigger_id"] for r in db_rows(
            path, "SELECT trigger_id FROM trigger_schedule_misfires WHERE decided_at_ms >= ?",
            restart_ms)}
        return decided == {"t-fire", "t-long", "t-skip"} and all(
            max(r["scheduled_for_ms"] for r in runs_of(path, t)) >= restart_ms + 2000
            for t in ("t-skip", "t-fire"))

    wait_for(caught_up, 30, "the restarted serve to decide the misfires and admit again")
    time.sleep(1.0)
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=30) == 0
    assert "Traceback" not in path.with_suffix(".out2").read_text()

    misfires = db_rows(path, "SELECT * FROM trigger_schedule_misfires ORDER BY trigger_id, due_at_ms")
    after = [r for r in misfires if r["decided_at_ms"] >= restart_ms]
    assert {r["trigger_id"] for r in after} == {"t-fire", "t-long", "t-skip"}
    for trigger in ("t-skip", "t-fire"):
        scheduled = [r["scheduled_for_ms"] for r in runs_of(path, trigger)]
        assert len(scheduled) == len(set(scheduled)), "an occurrence was admitted twice"
        mine = [r for r in misfires if r["trigger_id"] == trigger]
        # The first decision after the restart starts where the killed serve left the cursor:
        # after its last admission, or where a misfire before the kill moved it (a serve
        # stalled past the 2 s grace on a loaded machine misfires, and records it).
        left_at = max([max(before[trigger]) + 1000]
                      + [r["next_fire_at_ms"] for r in mine if r["decided_at_ms"] < restart_ms])
        assert next(r for r in mine if r["decided_at_ms"] >= restart_ms)["due_at_ms"] == left_at
        # Every misfire dropped exactly the occurrences before its t - g (the first one after
        # the restart those of the downtime; on a loaded machine the one it kept at the grace's
        # edge can be misfired by a second decision); every other occurrence has one Run.
        dropped: set[int] = set()
        for misfire in mine:
            due, through = misfire["due_at_ms"], misfire["skipped_through_ms"]
            assert through == misfire["decided_at_ms"] - 2000 - 1  # occurrences before t - g
            # the first whole second at or after t - g (a per-second trigger)
            assert misfire["next_fire_at_ms"] == -(-(through + 1) // 1000) * 1000
            dropped |= set(range(due, through + 1, 1000))
            if trigger == "t-fire":
                dropped.discard(due)  # fire_once admits exactly one Run for each misfired stretch
                assert misfire["run_id"] is not None
        expected = [t for t in range(scheduled[0], scheduled[-1] + 1, 1000) if t not in dropped]
        assert scheduled == expected
        assert scheduled[-1] >= restart_ms + 2000  # kept admitting after the restart

    lost = db_rows(path, "SELECT r.id, r.status FROM runs r WHERE r.trigger_id = 't-long' AND r.status = 'lost'")
    assert len(lost) == len(orphans)
    for row in lost:
        events = [e["type"] for e in db_rows(path, "SELECT type FROM run_events WHERE run_id = ? ORDER BY sequence",
                                             row["id"])]
        assert events[-2:] == ["attempt.lost", "run.lost"]
    # The group reaper kills a dead server's commands at once; the restart kills whatever is
    # left: either way each lost Run whose command had started says what became of its
    # process, and none survives. (An Attempt the kill caught before its command started, as
    # a loaded host makes likelier, has no process to speak of: its Run says "unknown".)
    payloads = db_rows(path, "SELECT e.payload FROM run_events e JOIN run_attempts a "
                             "ON a.run_id = e.run_id WHERE e.type = 'run.lost' "
                             "AND a.pid IS NOT NULL")
    assert len(payloads) >= len(orphans)
    assert all('"process":"killed"' in p["payload"] or '"process":"gone"' in p["payload"]
               for p in payloads), [p["payload"] for p in payloads]
    for pid in orphans:
        assert not process_running(pid), f"command {pid} of a lost Run still runs"
    stuck = db_rows(path, "SELECT id FROM runs WHERE status IN ('dispatching', 'running')")
    assert stuck == []


