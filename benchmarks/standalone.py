"""Standalone burst: how fast `ql serve` (SQLite, its defaults) admits N occurrences due at
one instant.

    python -m benchmarks.standalone --triggers 2000 --runs 3

Each run: a fresh SQLite file (`ql db migrate`), one project with one task (`/bin/true`) and
N triggers whose next occurrence is the same instant T (a whole minute, at least 40 s ahead),
published with `ql apply`; then `ql serve` at its defaults until every occurrence is decided.
Printed per run and as medians: seconds from T to the last admission, admissions/s, lag
(runs.created_at_ms - scheduled_for_ms) p50/p99/max, and occurrences misfired or missing.
Only the `ql` command is used, so the same script measures any version of the product.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QL = [sys.executable, "-m", "qinglong"]
LEAD_S = 40  # T is at least this far ahead when `ql serve` starts


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


def run_once(count: int, folder: Path) -> dict[str, float]:
    path = folder / "burst.db"
    url = f"sqlite:///{path}"
    _ql(url, "db", "migrate")
    now = dt.datetime.now(dt.UTC)
    # T: the first whole minute at least LEAD_S after the definitions are published
    started = time.monotonic()
    spec = folder / "burst.yaml"
    guess = (now + dt.timedelta(seconds=LEAD_S + 60)).replace(second=0, microsecond=0)
    spec.write_text(_definitions(count, guess))
    _ql(url, "apply", "-f", str(spec))
    if dt.datetime.now(dt.UTC) > guess - dt.timedelta(seconds=LEAD_S // 2):
        raise SystemExit(f"publishing {count} triggers took {time.monotonic() - started:.0f} s: "
                         "too long for T; use fewer triggers")
    instant_ms = int(guess.timestamp() * 1000)
    serve = subprocess.Popen([*QL, "serve", "--database-url", url, "--quiet"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            time.sleep(1.0)
            with sqlite3.connect(path) as conn:
                admitted = conn.execute("SELECT count(*) FROM runs WHERE scheduled_for_ms = ?",
                                        (instant_ms,)).fetchone()[0]
                misfired = conn.execute("SELECT count(*) FROM trigger_schedule_misfires "
                                        "WHERE due_at_ms <= ? AND skipped_through_ms >= ?",
                                        (instant_ms, instant_ms)).fetchone()[0]
            if admitted + misfired >= count:
                break
            if time.time() * 1000 > instant_ms + 300_000:
                break
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(60)
    with sqlite3.connect(path) as conn:
        lags = [int(row[0]) for row in conn.execute(
            "SELECT created_at_ms - scheduled_for_ms FROM runs WHERE scheduled_for_ms = ?",
            (instant_ms,))]
    last = max(lags) if lags else 0
    return {"admitted": len(lags), "misfired": misfired, "missing": count - len(lags) - misfired,
            "last_s": last / 1000, "per_s": len(lags) / max(last / 1000, 0.001),
            "p50_ms": _percentile(lags, 0.5) if lags else 0,
            "p99_ms": _percentile(lags, 0.99) if lags else 0, "max_ms": last}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triggers", type=int, default=2000, help="occurrences due at T")
    parser.add_argument("--runs", type=int, default=3, help="repetitions (medians printed)")
    args = parser.parse_args()
    results = []
    for number in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="ql-standalone-") as folder:
            result = run_once(args.triggers, Path(folder))
        results.append(result)
        print(f"run {number + 1}: " + ", ".join(f"{k} {v:g}" for k, v in result.items()),
              flush=True)
    print(f"\nstandalone burst of {args.triggers} (medians of {args.runs}, pid {os.getpid()})")
    print(f"{'figure':<10} {'median':>10} {'min':>10} {'max':>10}")
    for key in results[0]:
        values = [r[key] for r in results]
        print(f"{key:<10} {statistics.median(values):>10g} {min(values):>10g} "
              f"{max(values):>10g}")


if __name__ == "__main__":
    main()
