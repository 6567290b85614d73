"""`ql serve` killed with kill -9 in the middle of a burst of batched admissions, restarted
and killed again, then left to finish: every occurrence of the burst is decided exactly once.

The standalone profile commits a claim's decisions together, in one ``BEGIN IMMEDIATE``
transaction (storage/admission/batch.py). Thousands of triggers due at the same instant T
keep it committing batch after batch. Each kill waits for two conditions, never for a time:
the running server has committed decisions of T since it started, and it holds SQLite's
write lock at that moment, so the kill lands in a write transaction (the admission's, but
for the executor's few: one long command at a time, a lease renewal a second). A kill after
the burst ended fails the test. At every kill each trigger must be wholly decided for T (its
Run or misfire record, and its cursor past T) or not at all; at the end every trigger has
exactly one decision for T, the Runs committed before the kills are the ones kept, and `ql
audit` finds nothing to report.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import signal
import sqlite3
import struct
import subprocess
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from tests.support.processes import process_running
from tests.support.ql import Ql, wait_for

pytestmark = pytest.mark.slow

TRIGGERS = 2_000  # a burst of several seconds at the standalone profile's batch rate
KILLS = 5  # each kill lands at its own point of a batch cycle
DAY_MS = 86_400_000
# T is this far ahead when the definitions are written: `ql apply` of 2,000 triggers takes
# about 2 s on an idle machine and `ql serve` initialises the cursors in a few more. If
# publishing ends too close to T (a loaded machine), a fresh database is tried with a longer
# lead: a trigger published after T would never have the occurrence.
LEADS_S = (10, 30)
PUBLISHED_BEFORE_T_MS = 2_000
# One Run executes at a time and it lasts: once it runs, the executor writes little (a lease
# renewal a second), so during the burst the writer is the admission. A killed server's
# command is killed by its group reaper, the last one's cancelled at its stop.
SERVE = ("serve", "--concurrency", "1", "--drain-timeout", "500ms")
# SQLite's WAL write lock: one byte of the -shm file (WALINDEX_LOCK_OFFSET 120 + WAL_WRITE_LOCK
# 0), held by the writer from BEGIN IMMEDIATE to COMMIT or ROLLBACK.
WAL_WRITE_LOCK_BYTE = 120
FLOCK = "@hhqqi4x"  # Linux struct flock: l_type, l_whence, l_start, l_len, l_pid


def db_rows(path: Path, sql: str, *params: object) -> list[sqlite3.Row]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def writer_of(path: Path) -> int | None:
    """The pid of the process in a write transaction on the database, if one is (F_GETLK
    only tests the lock, it takes nothing)."""
    try:
        fd = os.open(f"{path}-shm", os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        probe = struct.pack(FLOCK, fcntl.F_WRLCK, os.SEEK_SET, WAL_WRITE_LOCK_BYTE, 1, 0)
        kind, _, _, _, pid = struct.unpack(FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, probe))
    finally:
        os.close(fd)  # this process holds no lock on the file, so closing drops none
    return None if kind == fcntl.F_UNLCK else int(pid)


def definitions(count: int, at: dt.datetime) -> str:
    """One project, one long task and ``count`` triggers whose next occurrence is ``at`` (a
    daily 6-field cron: the occurrence after it is a day later)."""
    cron = f"{at.second} {at.minute} {at.hour} * * *"
    lines = ["apiVersion: qinglong/v1", "project: burst", "tasks:", "  long:",
             "    argv: [/bin/sleep, '300']", "triggers:"]
    for number in range(count):
        lines += [f"  t{number:05d}:", "    task: long", f"    cron: '{cron}'",
                  "    timezone: UTC", "    misfire: skip"]
    return "\n".join(lines) + "\n"


Servers = list[subprocess.Popen[str]]


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    """Every `ql serve` the test starts; one still running at the end (a failed test) is
    stopped, and a command still running is killed: nothing outlives the test. (A kill that
    lands while the executor starts a command, before it tells its group reaper, leaves the
    command running with no pid on record: an execution matter, not the admission this test
    judges, so it is cleaned up here rather than asserted.)"""
    started: Servers = []
    yield started
    for serve in started:
        if serve.poll() is None:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(timeout=30)
            except subprocess.TimeoutExpired:
                serve.kill()
                serve.wait(timeout=30)
    for pid in commands_left(tmp_path):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)  # a command leads its own process group


def commands_left(folder: Path) -> list[int]:
    """Running commands of Runs (a QL_RUN_ID in their environment) started in ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if (cwd == str(folder) or cwd.startswith(f"{folder}/")) and (
                environ.startswith(b"QL_RUN_ID=") or b"\0QL_RUN_ID=" in environ) and process_running(
                int(entry.name)):
            found.append(int(entry.name))
    return found


def start_serve(cli: Ql, path: Path, number: int, servers: Servers) -> subprocess.Popen[str]:
    serve = cli.start(*SERVE, stdout=path.with_suffix(f".out{number}"))
    servers.append(serve)
    return serve


def start_burst(tmp_path: Path, servers: Servers) -> tuple[Ql, Path, int, subprocess.Popen[str]]:
    """A migrated database with `ql serve` running on it, then TRIGGERS triggers published whose
    first occurrence is T (returned, in ms). The server starts first, so that it initialises
    the cursors while T is still ahead."""
    for attempt, lead in enumerate(LEADS_S):
        folder = tmp_path / f"try{attempt}"
        folder.mkdir()
        path = folder / "ql.db"
        cli = Ql(f"sqlite:///{path}", folder)
        cli.run("db", "migrate")
        serve = start_serve(cli, path, 0, servers)
        at = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=lead)).replace(microsecond=0)
        spec = folder / "burst.yaml"
        spec.write_text(definitions(TRIGGERS, at))
        cli.run("apply", "-f", str(spec), timeout=120)
        t_ms = int(at.timestamp() * 1000)
        [row] = db_rows(path, "SELECT count(*) AS n, max(created_at_ms) AS last "
                              "FROM trigger_revisions WHERE project_id = 'burst'")
        assert row["n"] == TRIGGERS
        if row["last"] <= t_ms - PUBLISHED_BEFORE_T_MS:
            return cli, path, t_ms, serve
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=60) == 0
    raise AssertionError(f"publishing {TRIGGERS} triggers took longer than {LEADS_S[-1]} s")


def decided_count(path: Path, t_ms: int) -> int:
    [row] = db_rows(path, "SELECT (SELECT count(*) FROM runs WHERE scheduled_for_ms = ?1) "
                          "+ (SELECT count(*) FROM trigger_schedule_misfires "
                          "   WHERE due_at_ms <= ?1 AND skipped_through_ms >= ?1) AS n", t_ms)
    return int(row["n"])


def in_a_write_after(path: Path, t_ms: int, seen: int, pid: int) -> bool:
    """More than ``seen`` decisions of T are on disk, and ``pid`` is in a write transaction."""
    return decided_count(path, t_ms) > seen and writer_of(path) == pid


Decisions = tuple[Counter[str], Counter[str], dict[str, int | None]]


def decisions_for(path: Path, t_ms: int) -> Decisions:
    """Runs for T and misfire records covering T, by trigger; every trigger's cursor."""
    runs = Counter(r["trigger_id"] for r in db_rows(
        path, "SELECT trigger_id FROM runs WHERE scheduled_for_ms = ?", t_ms))
    misfires = Counter(r["trigger_id"] for r in db_rows(
        path, "SELECT trigger_id FROM trigger_schedule_misfires "
              "WHERE due_at_ms <= ? AND skipped_through_ms >= ?", t_ms, t_ms))
    cursors = {r["trigger_id"]: r["next_fire_at_ms"] for r in db_rows(
        path, "SELECT trigger_id, next_fire_at_ms FROM trigger_schedules "
              "WHERE project_id = 'burst'")}
    return runs, misfires, cursors


def test_kill_minus_nine_mid_burst_keeps_every_occurrence_exactly_once(
        tmp_path: Path, servers: Servers) -> None:
    cli, path, t_ms, serve = start_burst(tmp_path, servers)
    triggers = {f"t{number:05d}" for number in range(TRIGGERS)}
    kept: dict[str, str] = {}  # the Runs on disk at each kill: Run id -> trigger
    seen = 0  # decisions of T on disk when the running server started
    for kill in range(1, KILLS + 1):
        # This server has committed decisions of T, and is in a write transaction now.
        wait_for(partial(in_a_write_after, path, t_ms, seen, serve.pid), LEADS_S[-1] + 90,
                 f"decisions of T by server {kill}, then its write lock", interval=0.01)
        serve.send_signal(signal.SIGKILL)
        assert serve.wait(timeout=30) == -signal.SIGKILL

        runs, misfires, cursors = decisions_for(path, t_ms)
        decided = set(runs) | set(misfires)
        assert len(decided) > seen
        assert len(decided) < TRIGGERS, (
            f"kill {kill} landed after the burst ({len(decided)} of {TRIGGERS} decided): it "
            "proves nothing about a kill mid-batch")
        # A batch commits whole or not at all: a trigger decided for T moved its cursor past
        # T, one not decided still waits at T (or was not initialised yet).
        assert set(cursors) == triggers
        moved = {t for t, cursor in cursors.items() if cursor is not None and cursor > t_ms}
        assert moved == decided, (f"kill {kill}: {sorted(moved - decided)[:5]} moved undecided, "
                                  f"{sorted(decided - moved)[:5]} decided unmoved")
        assert all(cursors[t] in (None, t_ms) for t in triggers - decided)
        assert max(runs.values(), default=1) == 1 and not set(runs) & set(misfires)
        on_disk = {r["id"]: r["trigger_id"] for r in db_rows(
            path, "SELECT id, trigger_id FROM runs WHERE scheduled_for_ms = ?", t_ms)}
        assert on_disk.items() >= kept.items(), "a Run committed before an earlier kill changed"
        kept = on_disk
        print(f"kill {kill}: {len(runs)} Runs and {len(misfires)} misfires of {TRIGGERS} on "
              f"disk, {sum(c is None for c in cursors.values())} cursors not initialised")
        seen = len(decided)
        serve = start_serve(cli, path, kill, servers)

    def all_moved() -> bool:
        [row] = db_rows(
            path, "SELECT count(*) AS moved FROM trigger_schedules WHERE next_fire_at_ms > ?", t_ms)
        return bool(row["moved"] == TRIGGERS)

    # every cursor past T: the last server has nothing of T left to decide (what it decided
    # is judged below, not waited for)
    wait_for(all_moved, 180, "the last server to move every cursor past T", interval=0.2)
    serve.send_signal(signal.SIGTERM)
    assert serve.wait(timeout=60) == 0
    for number in range(KILLS + 1):
        text = path.with_suffix(f".out{number}").read_text()
        assert "Traceback" not in text, text[max(0, text.index("Traceback") - 2000):][:6000]

    runs, misfires, cursors = decisions_for(path, t_ms)
    # exactly one decision for T per trigger: a Run or a misfire record, never both
    both = set(runs) & set(misfires)
    missing = triggers - set(runs) - set(misfires)
    doubled = {t: n for t, n in (runs + misfires).items() if n > 1}
    assert not both and not missing and not doubled, (
        f"{len(both)} with a Run and a misfire, {len(missing)} undecided, "
        f"{len(doubled)} decided twice (e.g. {sorted(both | missing | set(doubled))[:5]})")
    assert set(runs) | set(misfires) == triggers
    # nothing else was admitted, and each Run is a scheduled one of this burst
    every_run = db_rows(path, "SELECT id, trigger_id, scheduled_for_ms, trigger_type FROM runs")
    assert len(every_run) == sum(runs.values())
    assert {(r["scheduled_for_ms"], r["trigger_type"]) for r in every_run} == (
        {(t_ms, "cron")} if runs else set())
    # the Runs committed before the kills are the ones kept: the restarts admitted the others
    assert {r["id"]: r["trigger_id"] for r in every_run if r["id"] in kept} == kept
    # every cursor moved past T, to the next day's occurrence
    assert set(cursors.values()) == {t_ms + DAY_MS}

    audit = cli.run("audit", "--settle", "0s", "--json", check=False)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    report = json.loads(audit.stdout)
    assert report["ok"] is True and report["violations"] == 0
    assert report["window"]["from_ms"] <= t_ms <= report["window"]["required_until_ms"]
    totals = report["totals"]
    assert totals["expected"] == TRIGGERS
    assert totals["admitted"] == sum(runs.values())
    assert totals["gaps_explained"] == sum(misfires.values())
    assert (totals["duplicates"], totals["gaps_unexplained"], totals["spurious"],
            totals["bad_shape_runs"], totals["cursor_regressions"]) == (0, 0, 0, 0, 0)
    assert report["execution"]["violations"] == 0
    # no Run is left executing, and no command whose pid is on record still runs (the killed
    # servers' by their group reapers or their successors, the last one's cancelled at stop)
    assert db_rows(path, "SELECT id FROM runs WHERE status IN ('dispatching', 'running')") == []
    for row in db_rows(path, "SELECT pid FROM run_attempts WHERE pid IS NOT NULL"):
        assert not process_running(row["pid"]), f"command {row['pid']} of a Run still runs"


