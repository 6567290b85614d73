"""Standalone burst: how fast `ql serve` (SQLite, its defaults) admits N occurrences due at
one instant, and how long it takes to run them all.

    python -m benchmarks.standalone                  # N = 10,000, 3 repetitions
    python -m benchmarks.standalone --triggers 1000 --runs 1

Each run: a fresh SQLite file (`ql db migrate`), one project with one task (`/bin/true`) and
N triggers whose next occurrence is the same instant T (a whole minute, at least 40 s ahead),
published with `ql apply`; then `ql serve` at its defaults (4 commands at once) until every
occurrence is decided and every Run it admitted has ended.
Printed per run and as medians with min-max: seconds from T to the last admission,
admissions/s, lag (runs.created_at_ms - scheduled_for_ms) p50/p99/max, occurrences misfired
or missing; seconds from T to the last Run finished (max finished_at_ms - T), Runs/s
(the Runs that ended over that), Runs succeeded; the CPU seconds of `ql serve` (with the commands it reaped)
and of the machine from T to the end.

Checks (a failure is printed loudly and the command exits 1): no occurrence admitted twice,
every occurrence decided (admitted, or recorded as misfired), every admitted Run succeeded.
Targets for N = 10,000: all admitted within 3 s, no misfire, all executed within 60 s
(printed as met or MISSED; a misfire is a missed target, not a failed check). The JSON (command, machine,
options, summary, every run) goes to ``benchmarks/results/standalone-<date>.json``.
Only the `ql` command drives the product, so the same script measures any version of it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.cpu import CpuMeter, cpu_share
from benchmarks.report import (
    Figure,
    Report,
    print_table,
    print_targets,
    say,
    summarize,
    verdict,
)

QL = [sys.executable, "-m", "qinglong"]
LEAD_S = 40  # T is at least this far ahead when `ql serve` starts
TERMINAL = ("succeeded", "failed", "cancelled", "timed_out", "lost")
TARGET_SIZE = 10_000
TARGETS = [("all admitted within 3 s", "last_admission_s", 3.0),
           ("no misfire", "misfired", 0.0),
           ("all executed within 60 s", "last_finished_s", 60.0)]


def _ql(url: str, *args: str) -> None:
    subprocess.run([*QL, *args, "--database-url", url], check=True, capture_output=True)


def _definitions(count: int, minute: dt.datetime) -> str:
    cron = f"{minute.minute} {minute.hour} * * *"
    lines = ["apiVersion: qinglong/v1", "project: burst", "tasks:", "  job:",
             "    argv: [/bin/true]", "triggers:"]
    for number in range(count):
        lines += [f"  t{number:05d}:", "    task: job", f"    cron: '{cron}'",
                  "    timezone: UTC"]
    return "\n".join(lines) + "\n"


def _percentile(values: list[int], share: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _state(path: Path, instant_ms: int) -> tuple[int, int, int]:
    """(Runs admitted for T, occurrences of T misfired, Runs of T that have ended)."""
    ended = ", ".join(f"'{status}'" for status in TERMINAL)
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
        admitted, done = conn.execute(
            f"SELECT count(*), count(*) FILTER (WHERE status IN ({ended})) FROM runs "
            "WHERE scheduled_for_ms = ?", (instant_ms,)).fetchone()
        misfired = conn.execute("SELECT count(*) FROM trigger_schedule_misfires "
                                "WHERE due_at_ms <= ? AND skipped_through_ms >= ?",
                                (instant_ms, instant_ms)).fetchone()[0]
    return int(admitted), int(misfired), int(done)


def _publish(count: int, folder: Path, url: str) -> int:
    """The definitions for T, applied; T in ms. T is the first whole minute at least LEAD_S
    after they are published."""
    _ql(url, "db", "migrate")
    started = time.monotonic()
    spec = folder / "burst.yaml"
    guess = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=LEAD_S + 60)).replace(
        second=0, microsecond=0)
    spec.write_text(_definitions(count, guess))
    _ql(url, "apply", "-f", str(spec))
    if dt.datetime.now(dt.UTC) > guess - dt.timedelta(seconds=LEAD_S // 2):
        raise SystemExit(f"publishing {count} triggers took {time.monotonic() - started:.0f} s: "
                         "too long for T; use fewer triggers")
    return int(guess.timestamp() * 1000)


def _wait(path: Path, count: int, instant_ms: int, timeout_s: int) -> None:
    """Until every occurrence of T is decided and every Run of T has ended, printing progress
    every 5 s; at most ``timeout_s`` after T."""
    last_print = time.monotonic()
    while True:
        time.sleep(0.5)
        admitted, misfired, done = _state(path, instant_ms)
        if admitted + misfired >= count and done >= admitted:
            return
        late_s = time.time() - instant_ms / 1000
        if late_s > timeout_s:
            say(f"  not done {timeout_s} s after the instant; giving up")
            return
        if late_s > 0 and time.monotonic() - last_print >= 5:
            say(f"    t+{late_s:5.1f} s: admitted {admitted:,}/{count:,}, misfired {misfired:,},"
                f" ended {done:,}")
            last_print = time.monotonic()


def run_once(count: int, folder: Path, timeout_s: int) -> dict[str, Any]:
    path = folder / "burst.db"
    url = f"sqlite:///{path}"
    instant_ms = _publish(count, folder, url)
    say(f"  {count:,} triggers published; the instant is in "
        f"{instant_ms / 1000 - time.time():.0f} s")
    serve = subprocess.Popen([*QL, "serve", "--database-url", url, "--quiet"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    meter = CpuMeter()
    meter.track("serve", serve.pid)
    try:
        time.sleep(max(0.0, instant_ms / 1000 - time.time()))
        start = meter.sample()
        _wait(path, count, instant_ms, timeout_s)
        end = meter.sample()
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(60)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT trigger_id, status, created_at_ms - scheduled_for_ms, "
                            "finished_at_ms FROM runs WHERE scheduled_for_ms = ?",
                            (instant_ms,)).fetchall()
    _admitted, misfired, _done = _state(path, instant_ms)
    lags = [int(row[2]) for row in rows]
    finished = [int(row[3]) - instant_ms for row in rows if row[3] is not None]
    triggers = len({row[0] for row in rows})
    succeeded = sum(1 for row in rows if row[1] == "succeeded")
    last, executed = (max(lags) if lags else 0), (max(finished) if finished else 0)
    serve_s = end.seconds["serve"] - start.seconds["serve"]
    return {
        "admitted": len(rows), "duplicates": len(rows) - triggers, "misfired": misfired,
        "missing": count - triggers - misfired, "last_admission_s": last / 1000,
        "admissions_per_s": round(len(rows) / max(last / 1000, 0.001), 1),
        "lag_ms": {"p50": _percentile(lags, 0.5) if lags else 0,
                   "p99": _percentile(lags, 0.99) if lags else 0, "max": last},
        "succeeded": succeeded, "not_succeeded": len(rows) - succeeded,
        "last_finished_s": executed / 1000,
        "runs_per_s": round(len(finished) / max(executed / 1000, 0.001), 1),
        "cpu_s": {"serve": round(serve_s, 2),
                  "machine": round(end.seconds["machine"] - start.seconds["machine"], 2)},
        "cpu_ms_per_run": round(1000 * serve_s / count, 3),
        "cpu_percent_other": cpu_share(start, end).get("other", 0.0),
        "failed_checks": checks(count, len(rows), triggers, misfired, succeeded),
    }


def checks(count: int, runs: int, triggers: int, misfired: int, succeeded: int) -> list[str]:
    """What broke the product's promise: an occurrence admitted twice, one neither admitted
    nor recorded as misfired, an admitted Run that did not succeed. (A misfire is the
    documented fate of an occurrence decided after the grace: it misses a target instead.)"""
    failed = []
    if runs != triggers:
        failed.append(f"each occurrence admitted at most once: {runs:,} Runs from "
                      f"{triggers:,} triggers")
    if triggers + misfired != count:
        failed.append(f"all {count:,} occurrences decided: {triggers:,} admitted, "
                      f"{misfired:,} misfired")
    if succeeded != runs:
        failed.append(f"every admitted Run succeeded: {succeeded:,} of {runs:,} did")
    return failed


FIGURES: list[Figure] = [
    ("last_admission_s", "last admission after the instant", "s"),
    ("admissions_per_s", "admissions per second", "Runs/s"),
    ("lag_ms.p50", "admission lag p50", "ms"),
    ("lag_ms.p99", "admission lag p99", "ms"),
    ("lag_ms.max", "admission lag max", "ms"),
    ("admitted", "Runs admitted", "Runs"),
    ("duplicates", "occurrences admitted twice", "Runs"),
    ("misfired", "occurrences misfired", "Runs"),
    ("missing", "occurrences missing (not decided)", "Runs"),
    ("last_finished_s", "last Run finished after the instant", "s"),
    ("runs_per_s", "Runs finished per second (Runs / s)", "Runs/s"),
    ("succeeded", "Runs succeeded", "Runs"),
    ("cpu_s.serve", "CPU ql serve (with its commands)", "s"),
    ("cpu_ms_per_run", "CPU ql serve per Run", "ms"),
    ("cpu_s.machine", "CPU machine busy (all CPUs)", "s"),
    ("cpu_percent_other", "CPU other processes", "% of 1 CPU"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.standalone", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--triggers", type=int, default=10_000,
                        help="occurrences due at T (default 10000)")
    parser.add_argument("--runs", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument("--timeout", type=int, default=600,
                        help="seconds after T to give up waiting for the Runs (default 600)")
    parser.add_argument("--output", type=Path,
                        help="JSON file (default benchmarks/results/standalone-<date>.json)")
    args = parser.parse_args(argv)
    report = Report("standalone")
    report.announce()
    results = []
    for number in range(1, args.runs + 1):
        say(f"run {number}/{args.runs}: {args.triggers:,} triggers due at one instant")
        with tempfile.TemporaryDirectory(prefix="ql-standalone-") as folder:
            result = run_once(args.triggers, Path(folder), args.timeout)
        results.append({"repetition": number, **result})
        say(f"  last admission {result['last_admission_s']:g} s, last Run finished "
            f"{result['last_finished_s']:g} s after the instant; {result['admitted']:,} "
            f"admitted, {result['misfired']} misfired, {result['succeeded']:,} succeeded")
        for text in result["failed_checks"]:
            say(f"  !!! CHECK FAILED in run {number}: {text}")
    summary = summarize(results, FIGURES)
    print_table(summary, args.runs, FIGURES, title=(
        f"standalone burst: {args.triggers:,} occurrences of /bin/true due at one instant, "
        f"ql serve on SQLite at its defaults; median of {args.runs}"
        + (" (min-max)" if args.runs > 1 else "")))
    if args.triggers == TARGET_SIZE:
        print_targets(summary, TARGET_SIZE, TARGETS)
    report.write(vars(args), summary, results, output=args.output)
    return verdict(results, f"checks passed in every run: each of the {args.triggers:,} "
                            "occurrences decided once, every admitted Run succeeded")

if __name__ == "__main__":
    sys.exit(main())
