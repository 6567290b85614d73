"""`make demo-standalone`: publish a few tasks and triggers into a temporary SQLite
database, run `ql serve` for about 20 seconds with its live output, then print per
trigger: expected occurrences, admitted, executed, duplicates and gaps.

The triggers are published one after another (each `ql trigger publish` is a process of its
own, and a trigger starts at its first occurrence at or after its own publish), so the
summary judges only the window in which every trigger was published: from the latest
publish time the database recorded (`published_at_ms` of `ql trigger list --json`) to 1 s
before `ql serve` was stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from qinglong.domain.cron import CronSchedule

SERVE_SECONDS = float(os.environ.get("QL_DEMO_SECONDS", "20"))
TRIGGERS = [
    # trigger id, task id, cron, timezone
    ("every-second", "hello", "* * * * * *", "UTC"),
    ("every-5s", "date", "*/5 * * * * *", "Asia/Shanghai"),
    ("every-second-berlin", "work", "* * * * * *", "Europe/Berlin"),
]


def ql(db_url: str, *args: str, capture: bool = False) -> str:
    command = [sys.executable, "-m", "qinglong", *args]
    env = {**os.environ, "QL_DATABASE_URL": db_url}
    done = subprocess.run(command, env=env, check=True, text=True,
                          capture_output=capture)
    return done.stdout if capture else ""


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="ql-demo-") as tmp:
        db_url = f"sqlite:///{Path(tmp) / 'demo.db'}"
        print(f"== database {db_url}")
        ql(db_url, "db", "migrate")
        ql(db_url, "project", "create", "demo")
        ql(db_url, "task", "publish", "--project", "demo", "--task", "hello",
           "--shell", 'echo "hello from $QL_TRIGGER_ID at $QL_SCHEDULED_FOR"')
        ql(db_url, "task", "publish", "--project", "demo", "--task", "date", "--argv", "/bin/date", "-u")
        ql(db_url, "task", "publish", "--project", "demo", "--task", "work",
           "--shell", "sleep 0.3; echo done")
        for trigger_id, task_id, cron, zone in TRIGGERS:
            ql(db_url, "trigger", "publish", "--project", "demo", "--trigger", trigger_id,
               "--task", task_id, "--cron", cron, "--timezone", zone, "--misfire", "skip")
        ql(db_url, "trigger", "list", "--project", "demo")
        published_ms = all_published_ms(db_url)
        print(f"== ql serve for {SERVE_SECONDS:.0f} s")
        serve = subprocess.Popen(
            [sys.executable, "-m", "qinglong", "serve"], env={**os.environ, "QL_DATABASE_URL": db_url}
        )
        time.sleep(SERVE_SECONDS)
        stopped_ms = time.time_ns() // 1_000_000
        serve.send_signal(signal.SIGINT)
        if serve.wait(timeout=30) != 0:
            print("ql serve did not stop cleanly", file=sys.stderr)
            return 1
        runs = json.loads(ql(db_url, "run", "list", "--json", "--limit", "10000", capture=True))
        return summarize(runs, published_ms, stopped_ms)


def all_published_ms(db_url: str) -> int:
    """The instant from which every demo trigger was published: the latest of their publish
    times as the database recorded them."""
    listed = json.loads(ql(db_url, "trigger", "list", "--project", "demo", "--json",
                           capture=True))
    published = {str(t["trigger"]): int(t["published_at_ms"]) for t in listed}
    missing = {trigger_id for trigger_id, *_ in TRIGGERS} - set(published)
    if missing:
        raise SystemExit(f"triggers not published: {sorted(missing)}")
    return max(published.values())


def summarize(runs: list[dict[str, object]], published_ms: int, stopped_ms: int) -> int:
    print("\n== summary (window: from when the last trigger was published to 1 s before "
          "stop)")
    header = f"{'trigger':<22}{'expected':>9}{'admitted':>9}{'executed':>9}{'duplicates':>11}{'gaps':>6}"
    print(header)
    print("-" * len(header))
    failures = 0
    window_end = stopped_ms - 1000
    for trigger_id, _task, cron, zone in TRIGGERS:
        schedule = CronSchedule.parse(cron, zone)
        expected = []
        at = schedule.first_at_or_after(published_ms)
        while at <= window_end:
            expected.append(at)
            at = schedule.next_after(at)
        mine = [r for r in runs if r["trigger"] == trigger_id]
        counts = Counter(int(r["scheduled_for_ms"]) for r in mine)  # type: ignore[arg-type]
        in_window = [t for t in counts if published_ms <= t <= window_end]
        executed = sum(1 for r in mine
                       if published_ms <= int(r["scheduled_for_ms"]) <= window_end  # type: ignore[call-overload]
                       and r["status"] in ("succeeded", "failed", "timed_out"))
        duplicates = sum(n - 1 for n in counts.values() if n > 1)
        gaps = sum(1 for t in expected if t not in counts)
        spurious = sum(1 for t in in_window if t not in set(expected))
        failures += duplicates + gaps + spurious
        print(f"{trigger_id:<22}{len(expected):>9}{len(in_window):>9}{executed:>9}{duplicates:>11}{gaps:>6}")
    print("\nresult:", "OK, every occurrence admitted exactly once" if failures == 0 else
          f"{failures} problem(s)")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
