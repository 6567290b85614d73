"""The soak: N replicas, W workers, M triggers, T minutes of seeded chaos, then `ql audit`.

One replica talks to PostgreSQL through our wire proxy (lost COMMIT replies, stalled links)
and, when we may create network namespaces, another runs in a namespace (partitions). A
chaos loop picks one action every 1-4 s from a seeded random generator (printed, so a
failing run can be repeated): SIGKILL and restart a replica, SIGSTOP one for longer than the
lease, terminate a backend, drop a COMMIT reply, partition, stall the link, republish a
trigger; the database itself is crashed and restarted once. Each replica generation
holds a fifth of its admission transactions open for a random 0-200 ms so kills land
inside transactions. Then the chaos stops, everything heals, the replicas drain and stop,
and the audit judges invariants I1-I8 (docs/guarantees.md) over the whole window, against
the ledger of acknowledged admissions as well as the database.

Workers execute every Run: the task's command itself appends a line (Run, Attempt, lease
generation, time) when it starts and one when it ends to a ledger of its own, so the soak can prove from the outside that
no two processes of one Run ever ran at once. Workers are killed, stopped for longer than
their lease, and have their backends terminated like the replicas; at the end every Run must
have ended in exactly one terminal state with a consistent chain of Attempts.

Flows are in the mix: a flow `diamond` (a -> b, c -> d, and e after d always) of the same
task is started every ~1.5 s through everything the chaos does (a start that fails is sent
again with the same request id), so a node's ending -- a worker's finish, a lost Attempt the
reconciler ends -- releases the next nodes while replicas, workers and the database are
killed. The audit then judges every flow run (F1-F4: each released step admitted once, none
lost, docs/controls/flows.md), and every flow run must have ended. A trigger `diamond-3s`
starts the same flow at each of its occurrences: the replicas admit those as flow runs
through the same faults, and the audit judges each occurrence (admitted once, by the claim
that held it) as it judges the Runs of the other triggers.
"""

from __future__ import annotations

import json
import os
import random
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from qinglong.audit.execution import ExecutionReport, check_execution
from qinglong.audit.model import AuditParams, AuditReport
from qinglong.clock import SystemClock
from qinglong.domain.flow import parse_flow
from qinglong.domain.flow_runs import FlowStart
from qinglong.domain.retry import RetryPolicy
from qinglong.domain.task import CommandSpec, EnvEntry, ShellCommand
from qinglong.errors import QinglongError
from qinglong.profiles.audit_backend import run_audit
from qinglong.storage.admission import RequestAdmissions
from qinglong.storage.definitions import DefinitionStore
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.kernel import Tx
from qinglong.storage.postgres.connection import SingleConnector
from qinglong.storage.postgres.driver import open_postgres
from qinglong.storage.postgres.open import migrate_postgres
from qinglong.storage.runs.flow_store import FlowStore
from testkit.cluster import Replica, Worker, percentile
from testkit.pgproxy import PgProxy, ProxyMode
from testkit.postgres import EmbeddedPostgres

DB = "ql"
WORKER_NICENESS = 10
ACTIONS = (
    ("kill", 40), ("stop", 15), ("terminate", 15), ("drop_commit", 10),
    ("partition", 10), ("blackhole", 5), ("republish", 5),
    ("kill_worker", 12), ("stop_worker", 6), ("terminate_worker", 6),
)
# The command every Run executes (bash builtins but one sleep, to keep tens of Runs a second light
# on 2 cores): a line when it starts and one when it ends, ~0.3 s apart, into its ledger.
BEAT = ('beat() { t=${EPOCHREALTIME/./}; '
        'echo "$QL_RUN_ID $QL_ATTEMPT_ID $QL_LEASE_GENERATION ${t:0:13}" >> "$SOAK_LEDGER"; }; '
        'beat; sleep 0.3; beat')
# the drain's questions (`_Soak.drained`)
DRAIN_BEHIND = (
    "SELECT count(*) FROM qinglong.trigger_schedules s JOIN qinglong.trigger_revisions tr "
    "ON tr.project_id = s.project_id AND tr.trigger_id = s.trigger_id "
    "AND tr.revision = s.trigger_revision "
    "WHERE tr.enabled AND s.next_fire_at_ms < floor(extract(epoch FROM clock_timestamp()) * 1000) - 1000")
DRAIN_ATTEMPTS = (
    "SELECT worker_id, coalesce(lease_expires_at_ms "
    "< floor(extract(epoch FROM clock_timestamp()) * 1000), false) "
    "FROM qinglong.run_attempts WHERE status IN ('claimed', 'starting', 'running')")
REPUBLISH_ZONES = ("UTC", "Europe/Berlin", "Asia/Kolkata", "America/New_York", "Australia/Adelaide")
FLOW = {"flow": "diamond", "nodes": {"a": "t", "b": {"task": "t", "after": "a"},
                                     "c": {"task": "t", "after": "a"},
                                     "d": {"task": "t", "after": ["b", "c"]},
                                     "e": {"task": "t", "after": {"d": "always"}}}}
FLOW_EVERY_S = 1.5


@dataclass(frozen=True, slots=True, kw_only=True)
class SoakConfig:
    replicas: int = 3
    workers: int = 2
    worker_lease_ms: int = 5_000
    triggers: int = 20
    seconds: float = 60.0
    seed: int | None = None
    lease_ms: int = 3_000
    grace_ms: int = 30_000
    # after the chaos, before the replicas stop, the drain lasts until the cluster has caught
    # up (`_Soak.drained`), and this long at most: long enough for a worker killed in the last
    # second to have its Attempts rescued (its lease, 5 s, + the reconciler's grace, 5 s, +
    # two reconciler cycles, 2 s each, + a margin); 8 s left such Runs dispatching for good
    drain_s: float = 16.0
    partitions: bool = True  # needs root (network namespaces)
    work_dir: Path | None = None


@dataclass(slots=True)
class SoakResult:
    seed: int
    faults: Counter[str]
    invariants: dict[str, bool]
    figures: dict[str, Any]
    report: AuditReport
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(self.invariants.values())


def _log(message: str) -> None:
    print(f"soak {time.strftime('%H:%M:%S')} {message}", flush=True)


def _started(process: Any) -> bool:
    """Whether ``process`` (a replica or a worker) is not running or has said it started: its
    first state line (`starting`, with its HTTP port) comes after its stop signals are
    handled. Read from its log, which reaches the namespace replica's process too."""
    if process.process is None or process.process.poll() is not None:
        return True
    try:
        return "http on port" in process.log.read_text(errors="replace")
    except OSError:
        return False


class _Soak:
    def __init__(self, config: SoakConfig, work: Path) -> None:
        self.config = config
        self.work = work
        self.seed = config.seed if config.seed is not None else random.SystemRandom().randrange(2**31)
        self.rng = random.Random(self.seed)
        self.faults: Counter[str] = Counter()
        self.problems: list[str] = []
        self.idle_violations = 0
        self.server = EmbeddedPostgres(base_dir=work / "pg", fsync=True)
        self.proxy: PgProxy | None = None
        self.namespace: Any = None
        self.replicas: list[Replica] = []
        self.workers: list[Worker] = []
        self.lock = threading.Lock()
        self.ledger = work / "acked.jsonl"
        self.command_ledger = work / "commands.log"
        self.flow_runs: set[str] = set()
        self.flow_starts: Counter[str] = Counter()  # (not faults: what the starter saw)

    # -- setting up ---------------------------------------------------------------------

    def prepare(self) -> None:
        self.server.start()
        if self.config.partitions:
            from testkit.netns import NetNamespace

            self.namespace = NetNamespace().create()
            self.server.allow_addresses(str(self.namespace.network), listen=[self.namespace.host_ip])
        migrate_postgres(self.server.dsn("postgres", DB))
        connector = SingleConnector(self.server.dsn("ql_admin", DB))
        admin = DefinitionStore(open_postgres(connector))
        admin.project_create(ProjectCreateParams(project_id="soak"))
        admin.task_publish(TaskPublishParams(project_id="soak", task_id="t", name="t", spec=CommandSpec(
            command=ShellCommand(command=BEAT, shell="/bin/bash"), timeout_ms=30_000,
            environment=(EnvEntry(name="SOAK_LEDGER", value=str(self.command_ledger)),),
            idempotent=True, retry=RetryPolicy(max_attempts=3, backoff_ms=500))))
        specs = [(f"t{i:03d}", "* * * * * *", "UTC") for i in range(self.config.triggers)]
        specs += [("every-5s", "*/5 * * * * *", "Asia/Shanghai"), ("minutely", "0 * * * * *", "UTC"),
                  ("berlin", "* * * * * *", "Europe/Berlin")]
        for trigger, cron, zone in specs:
            admin.trigger_publish(TriggerPublishParams(project_id="soak", trigger_id=trigger,
                                                       task_id="t", expression=cron, timezone=zone))
        connector.close()
        connector = SingleConnector(self.server.dsn("ql_admin", DB))
        db = open_postgres(connector)
        FlowStore(db, RequestAdmissions(db), actor_id="soak").flow_publish(parse_flow(FLOW),
                                                                           "soak")
        # and a trigger that starts the flow every 3 s: its occurrences are admitted as flow
        # runs by the replicas through every fault, judged as occurrences and as flow runs
        DefinitionStore(db).trigger_publish(TriggerPublishParams(
            project_id="soak", trigger_id="diamond-3s", flow="diamond",
            expression="*/3 * * * * *", timezone="UTC"))
        connector.close()
        self.proxy = PgProxy("127.0.0.1", self.server.port).start()
        for n in range(1, self.config.replicas + 1):
            self.replicas.append(self._replica(n))
        for n in range(1, self.config.workers + 1):
            # The workers (and the commands they start) run at a lower CPU priority: on one
            # small machine they stand in for workers on hosts of their own, so the Runs they
            # execute do not take the CPU the replicas need to admit on time (I7).
            self.workers.append(Worker(
                f"w{n}", self.server.dsn("ql_worker", DB), self.work, slots=16,
                lease_ms=self.config.worker_lease_ms, drain_timeout_ms=5_000,
                prefix=("nice", "-n", str(WORKER_NICENESS)), fresh_id_per_start=True))

    def _url(self, n: int) -> str:
        runtime = self.server.dsn("ql_runtime", DB)
        if n == 1 and self.proxy is not None:
            return self.proxy.route(runtime, sslmode="disable", gssencmode="disable")
        if n == 2 and self.namespace is not None:
            return f"postgresql://ql_runtime@{self.namespace.host_ip}:{self.server.port}/{DB}"
        return runtime

    def _replica(self, n: int) -> Replica:
        # a killed process comes back at once under a fresh id (its old one stays registered
        # until 30 s after its last heartbeat), as a supervisor with per-start names restarts it
        replica = Replica(f"r{n}", self._url(n), self.work, lease_ms=self.config.lease_ms,
                          grace_ms=self.config.grace_ms, fresh_id_per_start=True)
        if n == 2 and self.namespace is not None:
            replica.prefix = tuple(self.namespace.prefix)
        return replica

    def start_replica(self, replica: Replica) -> None:
        hold = self.rng.randrange(0, 201)
        replica.extra = ("--interval-ms", "250", "--reactivate-ms", "200", "--ack-ledger",
                         str(self.ledger), "--hold-in-tx-ms", str(hold),
                         "--hold-fraction", "0.2")
        replica.start()

    # -- chaos --------------------------------------------------------------------------

    def _later(self, seconds: float, action: Callable[[], None]) -> None:
        timer = threading.Timer(seconds, action)
        timer.daemon = True
        timer.start()

    def act_on_worker(self, name: str) -> None:
        workers = [w for w in self.workers if w.process is not None and w.process.poll() is None]
        if not workers:
            return
        victim = self.rng.choice(workers)
        assert victim.process is not None
        if name == "kill_worker":
            victim.kill()
            victim.start()
        elif name == "stop_worker":
            process = victim.process
            victim.freeze()

            def resume() -> None:
                if process.poll() is None:
                    process.send_signal(signal.SIGCONT)

            self._later(self.config.worker_lease_ms / 1000 + self.rng.uniform(0, 2), resume)
        elif name == "terminate_worker":
            with psycopg.connect(self.server.dsn("postgres", DB), autocommit=True) as conn:
                pids = [r[0] for r in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'ql-worker:%'")]
                if not pids:
                    return
                conn.execute("SELECT pg_terminate_backend(%s)", [self.rng.choice(pids)])
        self.faults[name] += 1

    def act(self, name: str) -> None:
        if name.endswith("_worker"):
            self.act_on_worker(name)
            return
        replicas = [r for r in self.replicas if r.process is not None and r.process.poll() is None]
        if not replicas:
            return
        victim = self.rng.choice(replicas)
        if name == "kill":
            victim.kill()
            self.start_replica(victim)
        elif name == "stop":
            assert victim.process is not None
            process = victim.process
            victim.freeze()
            pause_s = self.config.lease_ms / 1000 + self.rng.uniform(0, 2)
            def resume() -> None:
                if process.poll() is None:
                    process.send_signal(signal.SIGCONT)

            self._later(pause_s, resume)
        elif name == "terminate":
            with psycopg.connect(self.server.dsn("postgres", DB), autocommit=True) as conn:
                pids = [r[0] for r in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'ql-control:%'")]
                if pids:
                    conn.execute("SELECT pg_terminate_backend(%s)", [self.rng.choice(pids)])
        elif name == "drop_commit" and self.proxy is not None:
            self.proxy.arm(ProxyMode.DROP_COMMIT, count=1)
        elif name == "blackhole" and self.proxy is not None:
            self.proxy.arm(ProxyMode.BLACKHOLE)
            self._later(1.0, self.proxy.disarm)
        elif name == "partition" and self.namespace is not None:
            self.namespace.partition()
            self._later(self.rng.uniform(2, 6), self.namespace.heal)
        elif name == "republish":
            # A per-second trigger gets a new revision that is still per second (another zone),
            # so the soak keeps its occurrence count; every-5s changes its expression.
            if self.rng.random() < 0.75:
                params = TriggerPublishParams(
                    project_id="soak", trigger_id=f"t{self.rng.randrange(self.config.triggers):03d}",
                    expression="* * * * * *", timezone=self.rng.choice(REPUBLISH_ZONES))
            else:
                params = TriggerPublishParams(
                    project_id="soak", trigger_id="every-5s",
                    expression=self.rng.choice(["*/5 * * * * *", "*/3 * * * * *", "*/2 * * * * *"]),
                    timezone="Asia/Shanghai")
            connector = SingleConnector(self.server.dsn("ql_admin", DB))
            try:
                DefinitionStore(open_postgres(connector)).trigger_publish(params)
            except QinglongError as exc:  # e.g. the database is restarting: an admin retries later
                _log(f"republish {params.trigger_id} refused: {exc.code} {exc.message}")
                self.faults["republish_refused"] += 1
                return
            finally:
                connector.close()
        else:
            return
        self.faults[name] += 1

    def start_flows(self, stop: threading.Event) -> None:
        """Start the flow every FLOW_EVERY_S; a start that fails (the database restarting, a
        lost reply that no lookup settled) is sent again with the same request id."""
        n = 0
        request: str | None = None
        while not stop.wait(FLOW_EVERY_S):
            if request is None:
                n += 1
                request = f"soak-{self.seed}-{n}"
            connector = SingleConnector(self.server.dsn("ql_runtime", DB),
                                        application_name="ql-soak-flows")
            try:
                db = open_postgres(connector)
                started = FlowStore(db, RequestAdmissions(db), actor_id="soak").flow_start(
                    FlowStart(project_id="soak", flow_id="diamond", request_id=request,
                              actor="soak"))
                with self.lock:
                    self.flow_runs.add(started.flow_run_id)
                self.flow_starts["started"] += started.started
                self.flow_starts["found_by_its_request_id"] += not started.started
                request = None
            except (QinglongError, psycopg.Error, OSError) as exc:
                self.flow_starts["refused_then_sent_again"] += 1
                _log(f"flow start {request} refused: {exc}")
            finally:
                connector.close()

    def restart_database(self) -> None:
        self.server.crash()
        time.sleep(1.0)
        self.server.start()
        self.faults["database_restart"] += 1

    def watch_idle_transactions(self, stop: threading.Event) -> None:
        limit_s = max(0.5, min(10.0, self.config.lease_ms / 2000)) + 1.0
        while not stop.wait(1.0):
            try:
                with psycopg.connect(self.server.dsn("postgres", DB), connect_timeout=2) as conn:
                    row = conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' "
                        "AND application_name LIKE 'ql-control:%%' "
                        "AND clock_timestamp() - state_change > make_interval(secs => %s)", [limit_s]
                    ).fetchone()
                    self.idle_violations += int(row[0]) if row else 0
            except psycopg.Error:
                continue  # the database may be restarting

    def chaos(self, seconds: float) -> None:
        names = [name for name, _ in ACTIONS]
        weights = [weight for _, weight in ACTIONS]
        deadline = time.monotonic() + seconds
        restart_at = time.monotonic() + seconds * self.rng.uniform(0.3, 0.6)
        restarted = False
        every = max(10.0, min(60.0, seconds / 10))
        report_at = time.monotonic() + every
        while (now := time.monotonic()) < deadline - 2:
            if now >= report_at:
                report_at += every
                _log(f"chaos {seconds - (deadline - now):.0f}/{seconds:.0f} s: "
                     f"{sum(self.faults.values())} faults so far")
            if not restarted and now >= restart_at:
                self.restart_database()
                restarted = True
            else:
                name = self.rng.choices(names, weights)[0]
                try:
                    self.act(name)
                except (psycopg.Error, OSError) as exc:  # the chaos harness itself never stops
                    _log(f"{name} could not be injected: {exc}")
                    self.faults[f"{name}_not_injected"] += 1
            time.sleep(min(self.rng.uniform(1, 4), max(0.0, deadline - 2 - time.monotonic())))

    def heal(self) -> None:
        if self.proxy is not None:
            self.proxy.disarm()
        if self.namespace is not None:
            self.namespace.heal()
        for process in (*self.replicas, *self.workers):
            if process.process is not None and process.process.poll() is None:
                process.process.send_signal(signal.SIGCONT)

    def drained(self) -> bool:
        """Nothing the chaos left behind is still pending: no enabled trigger has an occurrence
        due more than a second ago unadmitted (claims of stopped or cut-off replicas have been
        taken over), every Attempt in progress belongs to a live worker process and holds
        an unexpired lease (a killed or fenced-out worker's Attempts have been rescued), and
        every live process has started (a SIGTERM before then, as the stop sends, would find
        its handlers not yet installed and end it with -15, which I8 counts against it)."""
        if not all(_started(p) for p in (*self.replicas, *self.workers)):
            return False  # a process the chaos restarted last is still starting
        live = {w.instance_id for w in self.workers
                if w.process is not None and w.process.poll() is None}
        try:
            with psycopg.connect(self.server.dsn("postgres", DB), connect_timeout=5) as conn:
                behind = conn.execute(DRAIN_BEHIND).fetchone()
                attempts = conn.execute(DRAIN_ATTEMPTS).fetchall()
        except psycopg.Error:
            return False
        return behind is not None and behind[0] == 0 and all(
            str(worker_id).split(":", 1)[0] in live and not expired
            for worker_id, expired in attempts)

    def drain(self) -> float:
        """Wait until `drained` (at most ``config.drain_s``); the seconds waited."""
        started = time.monotonic()
        deadline = started + self.config.drain_s
        while not self.drained() and time.monotonic() < deadline:
            time.sleep(0.5)
        return time.monotonic() - started

    def db_now(self) -> int:
        with psycopg.connect(self.server.dsn("postgres", DB), connect_timeout=5) as conn:
            row = conn.execute("SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint").fetchone()
        assert row is not None
        return int(row[0])

    def close(self) -> None:
        for process in (*self.replicas, *self.workers):
            if process.process is not None and process.process.poll() is None:
                process.process.kill()
                process.process.wait(10)
        if self.proxy is not None:
            self.proxy.stop()
        if self.namespace is not None:
            self.namespace.destroy()
        self.server.cleanup()


@dataclass(slots=True)
class Execution:
    """How the workers carried out the Runs: the execution audit (E1-E5) and what the
    commands themselves recorded."""

    report: ExecutionReport
    unsettled: int  # Runs not ended when the workers were stopped
    overlapping_processes: list[str]
    runs_with_output: int
    lost_attempts: int


def command_overlaps(ledger: Path) -> tuple[list[str], int]:
    """Runs whose commands ran in two processes at once, by the commands' own heartbeats:
    each (attempt, lease generation) spans its first to its last beat, and two spans of one
    Run must not intersect; and how many Runs wrote beats."""
    spans: dict[str, dict[tuple[str, str], list[int]]] = {}
    if ledger.exists():
        for line in ledger.read_text().splitlines():
            parts = line.split()
            if len(parts) != 4 or not parts[3].isdigit():
                continue  # a line cut short by a SIGKILL
            run_id, attempt_id, generation, at = parts
            span = spans.setdefault(run_id, {}).setdefault((attempt_id, generation),
                                                            [int(at), int(at)])
            span[0], span[1] = min(span[0], int(at)), max(span[1], int(at))
    overlaps = []
    for run_id, by_process in spans.items():
        latest_end: int | None = None
        for start, end in sorted(by_process.values()):
            if latest_end is not None and start <= latest_end:
                overlaps.append(f"{run_id}: two processes between {start} and {latest_end}")
            latest_end = end if latest_end is None else max(latest_end, end)
    return overlaps, len(spans)


def settle_runs(soak: _Soak, timeout_s: float = 45.0) -> Execution:
    """With the scheduler stopped, let the workers finish (retries included), then audit.
    The replicas' reconcilers stopped with them, so one keeps running here, as it would in a
    cluster whose replicas stay up: a worker that lost an Attempt in the last seconds of the
    run (its lease expired unrenewed) is rescued, not left for the audit to call stuck."""
    from qinglong.execution.reconciler import Reconciler
    from qinglong.storage.postgres.connection import SingleConnector
    from qinglong.storage.runs import RunStore

    url = soak.server.dsn("ql_runtime", DB)
    unfinished = -1
    deadline = time.monotonic() + timeout_s
    connector = SingleConnector(url, application_name="ql-soak-settle")
    try:
        reconciler = Reconciler(RunStore(open_postgres(connector), actor_id="soak-settle"))
        while time.monotonic() < deadline:
            reconciler.run_cycle()
            with connector.connection() as conn:  # the reconciler's own session
                row = conn.execute("SELECT (SELECT count(*) FROM qinglong.runs WHERE status NOT "
                                   "IN ('succeeded', 'failed', 'cancelled', 'timed_out', 'lost')) "
                                   "+ (SELECT count(*) FROM qinglong.flow_runs WHERE status = "
                                   "'running') AS n").fetchone()
            unfinished = int(row["n"]) if row else -1
            if unfinished == 0:
                break
            time.sleep(1.0)
    finally:
        connector.close()
    def judge(tx: Tx) -> tuple[ExecutionReport, int]:
        report = check_execution(tx, now_ms=tx.now_ms(), from_ms=0, to_ms=2**62,
                                 stale_ms=soak.config.worker_lease_ms + 10_000)
        lost = tx.sql("SELECT count(*) AS n FROM qinglong.run_attempts "
                      "WHERE status = 'lost'").fetchone()
        return report, int(lost["n"]) if lost else 0

    connector = SingleConnector(url, application_name="ql-soak-audit")
    try:  # one snapshot, as `ql audit` reads
        report, lost = open_postgres(connector).read("judge the execution", judge, snapshot=True)
    finally:
        connector.close()
    overlaps, with_output = command_overlaps(soak.command_ledger)
    return Execution(report=report, unsettled=unfinished, overlapping_processes=overlaps,
                     runs_with_output=with_output, lost_attempts=lost)


def run_soak(config: SoakConfig) -> SoakResult:
    work = config.work_dir or Path(tempfile.mkdtemp(prefix="ql-soak-"))
    soak = _Soak(config, work)
    _log(f"seed {soak.seed}: {config.replicas} replicas, {config.workers} workers, "
         f"{config.triggers} triggers, "
         f"{config.seconds:.0f} s, lease {config.lease_ms} ms, grace {config.grace_ms} ms, in {work}")
    watcher_stop = threading.Event()
    try:
        soak.prepare()
        for replica in soak.replicas:
            soak.start_replica(replica)
        for worker in soak.workers:
            worker.start()
        start_ms = soak.db_now()
        watcher = threading.Thread(target=soak.watch_idle_transactions, args=(watcher_stop,), daemon=True)
        watcher.start()
        flows_stop = threading.Event()
        flows = threading.Thread(target=soak.start_flows, args=(flows_stop,), daemon=True)
        if soak.workers:
            flows.start()
        soak.chaos(config.seconds)
        flows_stop.set()
        if soak.workers:
            flows.join(timeout=60)
        _log(f"chaos done: {dict(soak.faults)}; draining (at most {config.drain_s:.0f} s)")
        soak.heal()
        _log(f"drained in {soak.drain():.1f} s")
        end_ms = soak.db_now()
        codes = [replica.stop(timeout=30) for replica in soak.replicas]
        execution = settle_runs(soak) if soak.workers else None  # none: admission only
        codes += [worker.stop(timeout=30) for worker in soak.workers]
        watcher_stop.set()
        traces = [p.name for p in (*soak.replicas, *soak.workers)
                  for path in work.glob(f"{p.name}.*.log") if "Traceback" in path.read_text()]
        ledger = [json.loads(line) for line in soak.ledger.read_text().splitlines() if line.strip()] \
            if soak.ledger.exists() else []
        report = run_audit(soak.server.dsn("ql_runtime", DB), SystemClock(),
                           AuditParams(start_ms=start_ms, end_ms=end_ms, settle_ms=2_000,
                                       grace_ms=config.grace_ms, lease_ms=config.lease_ms), ledger)
        return _judge(soak, report, codes, traces, execution)
    finally:
        watcher_stop.set()
        soak.close()


def _judge(soak: _Soak, report: AuditReport, codes: list[int], traces: list[str],
           execution: Execution | None) -> SoakResult:
    triggers = report.triggers
    lags = [lag for t in triggers for lag in t.lags_ms]
    bound_ms = soak.config.lease_ms + 10_000
    ledger = report.ledger
    invariants = {
        "I1 exactly one Run per occurrence": sum(t.duplicates for t in triggers) == 0,
        "I2 no Run from a fenced-out claim": sum(len(t.fenced_out) for t in triggers) == 0,
        "I3 no lost occurrence (and every misfire decision right)": sum(
            len(t.gaps_unexplained) + len(t.spurious) + len(t.misfire_violations) for t in triggers) == 0,
        "I4 cursors never move back": sum(t.cursor_regressions for t in triggers) == 0,
        "I5 one first Attempt and two admission events per Run": sum(len(t.bad_shape) for t in triggers) == 0,
        "I6 acknowledged means durable": ledger is not None and ledger.violations == 0,
        f"I7 lateness within {bound_ms} ms": bool(lags) and max(lags) <= bound_ms,
        "I8 hygiene (clean exits, no tracebacks, no long idle transactions)":
            codes == [0] * len(codes) and not traces and soak.idle_violations == 0,
        "ql audit clean (exit 0)": report.ok,
    }
    figures: dict[str, object] = {
        "occurrences_expected": sum(t.expected for t in triggers),
        "runs_admitted": sum(t.admitted for t in triggers),
        "gaps_explained": sum(t.gaps_misfire + t.gaps_superseded for t in triggers),
        "acknowledged": ledger.acknowledged if ledger else 0,
        "lag_p50_ms": percentile(lags, 50), "lag_p99_ms": percentile(lags, 99),
        "lag_max_ms": max(lags, default=0),
        "raced": sum(1 for r in soak.replicas for e in r.events() if e.get("event") == "raced"),
        "in_doubt_resolved": sum(1 for r in soak.replicas for e in r.events() if e.get("in_doubt")),
        "exit_codes": codes, "idle_in_transaction_violations": soak.idle_violations,
    }
    if execution is not None:
        _judge_execution(soak, execution, invariants, figures)
        flows = report.flows
        invariants["F every flow step admitted once, none lost, every flow run ended"] = (
            flows is not None and flows.violations == 0 and flows.running == 0
            and flows.flow_runs >= len(soak.flow_runs) > 0)
        if flows is not None:
            by_trigger = next((t for t in report.triggers if t.trigger_id == "diamond-3s"),
                              None)
            figures.update({"flow_runs": flows.flow_runs, "flow_steps_released":
                            flows.steps_released, "flow_steps_skipped": flows.steps_skipped,
                            "flow_starts": dict(soak.flow_starts),
                            "flow_runs_by_trigger": by_trigger.admitted if by_trigger else 0})
            for name, found in flows.findings().items():
                if found:
                    soak.problems.append(f"{name}: {found[:5]}")
    return SoakResult(seed=soak.seed, faults=soak.faults, invariants=invariants, figures=figures,
                      report=report, problems=traces + soak.problems)


def _judge_execution(soak: _Soak, execution: Execution, invariants: dict[str, bool],
                     figures: dict[str, object]) -> None:
    invariants.update({
        "W1 every Run ended, in exactly one terminal state": execution.unsettled == 0
            and not execution.report.terminal_events,
        "W2 never two processes of one Run at once (the commands' own ledger)":
            not execution.overlapping_processes
            and execution.runs_with_output >= execution.report.ended * 0.9,
        "W3 a consistent chain of Attempts, none overlapping, none stuck": not (
            execution.report.attempt_chain or execution.report.overlapping
            or execution.report.stuck or execution.report.overspent),
    })
    figures.update({
        "runs_executed": execution.report.ended, "runs_with_command_output":
            execution.runs_with_output, "runs_retried": execution.report.retried,
        "attempts_lost_with_a_worker": execution.lost_attempts,
    })
    for name, found in execution.report.findings().items():
        if found:
            soak.problems.append(f"{name}: {found[:5]}")
    soak.problems += execution.overlapping_processes[:5]


def print_result(result: SoakResult) -> None:
    print(f"\nseed: {result.seed}")
    print("faults injected:")
    for name, count in sorted(result.faults.items()):
        print(f"  {name:<18}{count:>6}")
    print("invariants:")
    for name, held in result.invariants.items():
        print(f"  {'held  ' if held else 'BROKEN'}  {name}")
    print("figures:")
    for name, value in result.figures.items():
        print(f"  {name:<32}{value}")
    for problem in result.problems:
        print(f"  problem: {problem}")
    print("result:", "OK" if result.ok else "FAILED")


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=int(os.environ.get("QL_SOAK_REPLICAS", "4")))
    parser.add_argument("--workers", type=int, default=int(os.environ.get("QL_SOAK_WORKERS", "2")))
    parser.add_argument("--triggers", type=int, default=int(os.environ.get("QL_SOAK_TRIGGERS", "25")))
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("QL_SOAK_MINUTES", "10")))
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--no-partitions", action="store_true", help="skip the namespace replica")
    args = parser.parse_args()
    result = run_soak(SoakConfig(replicas=args.replicas, workers=args.workers, triggers=args.triggers,
                                 seconds=args.minutes * 60, seed=args.seed,
                                 partitions=not args.no_partitions))
    print_result(result)
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
