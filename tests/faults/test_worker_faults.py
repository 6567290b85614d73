"""`ql worker` processes killed, paused, cut off from their backends, cancelled without a
notification, drained and stormed with failures, against real `ql control` replicas.

Every command is a shell script that writes its own ledger (one line when it starts, one
every TICK_S while it runs, one when it ends), keyed by the Run id and Attempt id the executor
exports (QL_RUN_ID, QL_ATTEMPT_ID, QL_ATTEMPT). Each test ends with the same judge:

- no two processes of one Run were alive at the same time (a killed process is taken to live
  until its last ledger line plus a margin, or until its Attempt ended when its own executor
  recorded the ending, since an executor only records an ending after the process exited);
- no process outlived its Attempt (nothing runs on after lease + grace, when the reconciler
  has declared the Attempt lost), and no Attempt ran more than one process;
- every Run of the test is in exactly one ending state (one ending event), with no Attempt
  still claimed, starting or running;
- `ql audit` is clean for admission (every occurrence admitted exactly once).

The worker lease is 5 s (the smallest `ql worker` accepts); the reconciler in `ql control`
settles an Attempt 5 s after its lease expired (DEFAULT_GRACE_MS, not configurable) on a 2 s
cycle, so "lost" is due 10-12 s after a worker's last renewal.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from qinglong.domain.retry import RetryPolicy
from qinglong.domain.task import CommandSpec, EnvEntry, ShellCommand
from qinglong.domain.trigger import Overlap, OverlapPolicy
from qinglong.errors import ConnectionLost
from qinglong.execution.reconciler import DEFAULT_GRACE_MS
from qinglong.profiles.cluster import RECONCILE_INTERVAL_S
from qinglong.storage.definitions.params import TaskPublishParams, TriggerPublishParams
from testkit.cluster import Replica, Worker
from testkit.postgres import EmbeddedPostgres
from tests.faults.conftest import AUDIT_SETTLE_MS, FaultBed, wait_for
from tests.faults.test_server_faults import prepare
from tests.support.ql_process import run_ql

pytestmark = pytest.mark.slow

WORKER_LEASE_MS = 5_000
RECONCILE_GRACE_MS = DEFAULT_GRACE_MS
RECONCILE_EVERY_MS = int(RECONCILE_INTERVAL_S * 1000)
RENEW_EVERY_MS = WORKER_LEASE_MS // 3
# The latest a dead worker's started Attempt may still be unsettled after its lease expired.
LOST_DUE_MS = RECONCILE_GRACE_MS + RECONCILE_EVERY_MS + 1_500
TICK_S = 0.2
DEATH_MARGIN_MS = 500  # a killed process died within this of its last ledger line
ENDED = {"succeeded", "failed", "cancelled", "timed_out", "lost"}
ENDING_EVENTS = {"run.succeeded", "run.failed", "run.cancelled", "run.timed_out", "run.lost"}
ACTIVE_ATTEMPT = {"claimed", "starting", "running"}

# The command: a ledger line at start, one per tick, one at the end, then EXIT_CODE. The first
# attempt runs FIRST_TICKS ticks, later ones TICKS (so a retry can be short).
SCRIPT = """\
n="$TICKS"
if [ "$QL_ATTEMPT" = 1 ]; then n="$FIRST_TICKS"; fi
line() { echo "$1 $QL_RUN_ID $QL_ATTEMPT_ID $$ $(date +%s%3N) $QL_TRIGGER_ID $QL_ATTEMPT" >> "$LEDGER"; }
line start
i=0
while [ "$i" -lt "$n" ]; do sleep 0.2; line beat; i=$((i + 1)); done
line end
exit "$EXIT_CODE"
"""


# -- the commands' own ledger -------------------------------------------------------------


@dataclass
class Process:
    run_id: str
    attempt_id: str
    pid: int
    trigger: str
    attempt: int
    start_ms: int
    last_ms: int
    end_ms: int | None = None

    def alive(self) -> bool:
        """Still running (the pid still carries this Attempt's environment)."""
        try:
            environ = Path(f"/proc/{self.pid}/environ").read_bytes()
        except OSError:
            return False
        return f"QL_ATTEMPT_ID={self.attempt_id}".encode() in environ.split(b"\0")


def read_ledger(path: Path) -> list[Process]:
    found: dict[tuple[str, int], Process] = {}
    if not path.exists():
        return []
    for text in path.read_text().splitlines():
        words = text.split()
        if len(words) != 7:
            continue  # a line cut by a kill
        kind, run_id, attempt_id, pid, at, trigger, attempt = words
        key = (attempt_id, int(pid))
        if kind == "start":
            found[key] = Process(run_id=run_id, attempt_id=attempt_id, pid=int(pid),
                                 trigger=trigger, attempt=int(attempt), start_ms=int(at),
                                 last_ms=int(at))
            continue
        process = found[key]
        process.last_ms = max(process.last_ms, int(at))
        if kind == "end":
            process.end_ms = int(at)
    return sorted(found.values(), key=lambda p: p.start_ms)


def alive_until(process: Process, attempts: dict[str, dict[str, Any]]) -> float:
    """The latest the process may have been alive (infinity while it runs)."""
    if process.end_ms is not None:
        return process.end_ms
    if process.alive():
        return float("inf")
    bound = process.last_ms + DEATH_MARGIN_MS
    attempt = attempts.get(process.attempt_id)
    if attempt is not None and attempt["status"] in {"succeeded", "failed", "cancelled",
                                                     "timed_out"}:
        # its own executor recorded the ending, which it does after the exit
        bound = min(bound, attempt["finished_at_ms"])
    return bound


def overlaps(processes: list[Process], attempts: dict[str, dict[str, Any]]) -> list[str]:
    """Pairs of processes (in start order) alive at the same time."""
    found = []
    ordered = sorted(processes, key=lambda p: p.start_ms)
    for i, before in enumerate(ordered):
        until = alive_until(before, attempts)
        for after in ordered[i + 1:]:
            if until > after.start_ms:
                found.append(
                    f"attempt {before.attempt} of run {before.run_id} (pid {before.pid}, "
                    f"started {before.start_ms}, last seen {before.last_ms}, ended "
                    f"{before.end_ms}, alive {before.alive()}) overlaps attempt "
                    f"{after.attempt} of run {after.run_id} (pid {after.pid}, started "
                    f"{after.start_ms})")
    return found


# -- the bed ------------------------------------------------------------------------------


@dataclass
class WorkerBed:
    bed: FaultBed
    ledger: Path
    workers: list[Worker] = field(default_factory=list)
    triggers: list[str] = field(default_factory=list)
    start_ms: int = 0
    control: Replica | None = None

    # definitions

    def task(self, task_id: str, *, ticks: int = 5, first_ticks: int | None = None,
             exit_code: int = 0, idempotent: bool = False,
             retry: RetryPolicy | None = None) -> None:
        env = (EnvEntry(name="LEDGER", value=str(self.ledger)),
               EnvEntry(name="TICKS", value=str(ticks)),
               EnvEntry(name="FIRST_TICKS", value=str(ticks if first_ticks is None else first_ticks)),
               EnvEntry(name="EXIT_CODE", value=str(exit_code)))
        spec = CommandSpec(command=ShellCommand(command=SCRIPT, shell="/bin/sh"), environment=env,
                           retry=retry or RetryPolicy(), idempotent=idempotent)
        self.bed.admin.task_publish(TaskPublishParams(project_id="demo", task_id=task_id,
                                                      name=task_id, spec=spec))

    def next_second(self, ahead_s: int = 3) -> int:
        return (self.bed.now() // 1000 + ahead_s) * 1000

    def trigger(self, trigger_id: str, task_id: str, *, at_ms: int | None = None,
                overlap: Overlap | None = None) -> int | None:
        """A trigger firing every second, or (``at_ms``) once a minute at that second: within
        a test that is once. Returns ``at_ms``."""
        expression = "* * * * * *" if at_ms is None else f"{at_ms // 1000 % 60} * * * * *"
        self.bed.admin.trigger_publish(TriggerPublishParams(
            project_id="demo", trigger_id=trigger_id, task_id=task_id, expression=expression,
            timezone="UTC", misfire_policy="skip", overlap=overlap))
        if not self.start_ms:
            self.start_ms = at_ms if at_ms is not None else (self.bed.now() // 1000 + 1) * 1000
        self.triggers.append(trigger_id)
        return at_ms

    def disable(self, trigger_id: str) -> None:
        self.bed.admin.trigger_publish(TriggerPublishParams(
            project_id="demo", trigger_id=trigger_id, enabled=False))

    # processes

    def start_control(self) -> Replica:
        self.control = self.bed.replica("c1").start()
        return self.control

    def worker(self, worker_id: str, *, slots: int = 4, drain_timeout_ms: int = 5_000,
               ready: bool = True, url: str | None = None) -> Worker:
        """A worker on the database, or on ``url`` (a wire proxy's route to it)."""
        worker = Worker(worker_id, url or self.bed.db.url("ql_worker"), self.bed.tmp, slots=slots,
                        lease_ms=WORKER_LEASE_MS, drain_timeout_ms=drain_timeout_ms, poll_ms=200)
        self.workers.append(worker)
        worker.start()
        if ready:
            worker.wait_ready()
        return worker

    def close(self) -> None:
        for worker in self.workers:
            process = worker.process
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
                process.wait(10)
        for process in read_ledger(self.ledger):  # orphans of killed workers
            if process.alive():
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    # reading the database

    def runs(self) -> list[dict[str, Any]]:
        return self.bed.rows(
            "SELECT id, trigger_id, status, attempts_spent, cancel_reason, scheduled_for_ms, "
            "finished_at_ms, cancel_requested_at_ms, error_code FROM qinglong.runs WHERE trigger_id = ANY(%s) "
            "ORDER BY scheduled_for_ms, id", [self.triggers])

    def run_of(self, trigger_id: str) -> dict[str, Any] | None:
        rows = [r for r in self.runs() if r["trigger_id"] == trigger_id]
        assert len(rows) <= 1, rows
        return rows[0] if rows else None

    def attempts(self, run_id: str | None = None) -> list[dict[str, Any]]:
        ids = [run_id] if run_id else [r["id"] for r in self.runs()]
        return self.bed.rows(
            "SELECT id, run_id, attempt, status, worker_id, pid, started_at_ms, finished_at_ms, "
            "exit_code, error_code, lease_expires_at_ms, lease_generation "
            "FROM qinglong.run_attempts WHERE run_id = ANY(%s) ORDER BY run_id, attempt", [ids])

    def events(self, run_id: str | None = None) -> list[dict[str, Any]]:
        ids = [run_id] if run_id else [r["id"] for r in self.runs()]
        return self.bed.rows(
            "SELECT run_id, sequence, type, actor_type, attempt_id, payload, created_at_ms "
            "FROM qinglong.run_events WHERE run_id = ANY(%s) ORDER BY run_id, sequence", [ids])

    def status(self, trigger_id: str) -> str | None:
        run = self.run_of(trigger_id)
        return None if run is None else str(run["status"])

    def running_on(self, trigger_id: str, worker_id: str) -> dict[str, Any] | None:
        """The trigger's Run once its command runs on ``worker_id`` (and wrote its ledger)."""
        run = self.run_of(trigger_id)
        if run is None or run["status"] != "running":
            return None
        attempt = self.attempts(run["id"])[-1]
        if attempt["status"] != "running" or not str(attempt["worker_id"]).startswith(
                f"{worker_id}:"):
            return None
        if not any(p.attempt_id == attempt["id"] for p in read_ledger(self.ledger)):
            return None
        return run

    # the judge

    def judge(self) -> None:
        now = self.bed.now()
        runs = {r["id"]: r for r in self.runs()}
        attempts = {a["id"]: a for a in self.attempts()}
        events = self.events()
        processes = read_ledger(self.ledger)
        problems: list[str] = []

        # the database: one ending each, nothing left running
        for run in runs.values():
            if run["status"] not in ENDED:
                problems.append(f"run {run['id']} ({run['trigger_id']}) is still {run['status']}")
            endings = [e["type"] for e in events
                       if e["run_id"] == run["id"] and e["type"] in ENDING_EVENTS]
            if len(endings) != 1:
                problems.append(f"run {run['id']} has endings {endings}")
            if endings and endings[-1] != f"run.{run['status']}":
                problems.append(f"run {run['id']} is {run['status']} but ended {endings[-1]}")
        for attempt in attempts.values():
            if attempt["status"] in ACTIVE_ATTEMPT:
                problems.append(f"attempt {attempt['id']} of run {attempt['run_id']} is still "
                                f"{attempt['status']}")
            expires = attempt["lease_expires_at_ms"]
            if expires is not None and expires + LOST_DUE_MS < now:
                problems.append(f"attempt {attempt['id']} holds a lease that expired "
                                f"{now - expires} ms ago")
        for run_id in runs:
            won = [a for a in attempts.values()
                   if a["run_id"] == run_id and a["status"] == "succeeded"]
            if len(won) > 1:
                problems.append(f"run {run_id} succeeded {len(won)} times")

        # the commands' ledger
        per_attempt: dict[str, list[Process]] = {}
        for process in processes:
            per_attempt.setdefault(process.attempt_id, []).append(process)
        for attempt_id, group in per_attempt.items():
            if len(group) > 1:
                problems.append(f"attempt {attempt_id} ran {len(group)} processes")

        for process in processes:
            attempt = attempts.get(process.attempt_id)
            if attempt is None or attempt["run_id"] != process.run_id or (
                    attempt["attempt"] != process.attempt) or process.run_id not in runs:
                problems.append(f"process {process.pid} ran for an unknown attempt "
                                f"{process.attempt_id} of run {process.run_id}")
                continue
            until = alive_until(process, attempts)
            finished = attempt["finished_at_ms"]
            if finished is not None and until > finished + DEATH_MARGIN_MS:
                still = "still runs" if until == float("inf") else f"ran until {until}"
                problems.append(
                    f"process {process.pid} of run {process.run_id} attempt {process.attempt} "
                    f"{still}, after its attempt ended {attempt['status']} at {finished}")
        per_run: dict[str, list[Process]] = {}
        for process in processes:
            per_run.setdefault(process.run_id, []).append(process)
        for run_id, group in per_run.items():
            problems.extend(f"run {run_id}: {o}" for o in overlaps(group, attempts))
        assert not problems, "\n".join(problems)

        # admission
        self.bed.assert_exactly_once(self.start_ms)


@pytest.fixture
def wbed(bed: FaultBed) -> Iterator[WorkerBed]:
    harness = WorkerBed(bed=bed, ledger=bed.tmp / "commands.ledger")
    try:
        yield harness
    finally:
        harness.close()


# -- helpers ------------------------------------------------------------------------------


def worker_status(worker: Worker) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{worker.port}/status", timeout=2) as r:
        return dict(json.loads(r.read().decode()))


def processes_of(wbed: WorkerBed, run_id: str) -> list[Process]:
    return [p for p in read_ledger(wbed.ledger) if p.run_id == run_id]


def mid_run(wbed: WorkerBed, run_id: str) -> bool:
    """The Run's command runs and has beaten at least once since it started."""
    return any(p.end_ms is None and p.last_ms > p.start_ms and p.alive()
               for p in processes_of(wbed, run_id))


def wait_db_time(wbed: WorkerBed, at_ms: int, what: str) -> None:
    """Wait until the database clock has passed ``at_ms``."""
    wait_for(lambda: wbed.bed.now() > at_ms, what, max(5.0, (at_ms - wbed.bed.now()) / 1000 + 5))


def wait_ended(wbed: WorkerBed, timeout: float) -> list[dict[str, Any]]:
    def ended() -> list[dict[str, Any]] | None:
        runs = wbed.runs()
        return runs if runs and all(r["status"] in ENDED for r in runs) else None

    return list(wait_for(ended, "every run to end", timeout))


def wait_status(wbed: WorkerBed, trigger_id: str, status: str, what: str,
                timeout: float) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        run = wbed.run_of(trigger_id)
        return run if run is not None and run["status"] == status else None

    return dict(wait_for(reached, what, timeout))


def repeat(every_s: float, action: Callable[[], object]) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            action()
            stop.wait(every_s)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return stop, thread


# -- 1. a worker killed mid-run -----------------------------------------------------------


def sessions_of(wbed: WorkerBed, worker: str) -> list[dict[str, Any]]:
    """The database sessions of worker ``worker`` (by its application names) still open."""
    return wbed.bed.rows(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name LIKE %s",
        [wbed.bed.db.name, f"ql-worker:{worker}%"])


def test_worker_sigkill_mid_run_loses_or_retries_the_run(wbed: WorkerBed) -> None:
    """SIGKILL a worker while two long commands run on it: the reconciler marks both Attempts
    lost within lease + grace (+ its cycle) of the last renewal, never earlier; the Run of
    the non-idempotent task ends lost, the idempotent one is retried on the other worker and
    succeeds. The killed worker's commands must not run on beside the retry."""
    wbed.task("fragile", first_ticks=100, ticks=5)
    wbed.task("safe", first_ticks=100, ticks=5, idempotent=True,
              retry=RetryPolicy(max_attempts=2, backoff_ms=100, max_backoff_ms=100))
    at = wbed.next_second()
    wbed.trigger("t-fragile", "fragile", at_ms=at)
    wbed.trigger("t-safe", "safe", at_ms=at)
    wbed.start_control().wait_ready()
    a = wbed.worker("a")

    def both_on_a() -> list[dict[str, Any]] | None:
        runs = [wbed.running_on("t-fragile", "a"), wbed.running_on("t-safe", "a")]
        return [run for run in runs if run is not None] if all(runs) else None

    both = wait_for(both_on_a, "both commands to run on a", 15)
    b = wbed.worker("b")
    wait_for(lambda: all(mid_run(wbed, run["id"]) for run in both), "both commands mid-run", 10)
    a.kill()
    # A renewal a sent before the kill still commits: its backend notices the client is gone
    # only when it answers. Once a's backends have all ended, no renewal can land any more.
    wait_for(lambda: not sessions_of(wbed, "a"), "the killed worker's sessions to end", 30)
    ended_at = wbed.bed.now()  # after a's last renewal, whenever that one committed
    leases = {a_["run_id"]: a_ for a_ in wbed.attempts()}
    for attempt in leases.values():
        assert attempt["lease_expires_at_ms"] is not None
        assert attempt["lease_expires_at_ms"] - ended_at <= WORKER_LEASE_MS

    fragile = wait_status(wbed, "t-fragile", "lost", "the fragile run to be lost", 20)
    expiry = leases[fragile["id"]]["lease_expires_at_ms"]
    assert expiry + RECONCILE_GRACE_MS <= fragile["finished_at_ms"] <= expiry + LOST_DUE_MS, (
        fragile, expiry)
    assert fragile["finished_at_ms"] - ended_at <= WORKER_LEASE_MS + LOST_DUE_MS
    lost = [e for e in wbed.events(fragile["id"]) if e["type"] == "attempt.lost"]
    assert len(lost) == 1 and lost[0]["actor_type"] == "reconciler"
    assert lost[0]["payload"]["reason"] == "lease_expired"

    safe = wait_status(wbed, "t-safe", "succeeded", "the idempotent run to succeed on b", 30)
    safe_attempts = wbed.attempts(safe["id"])
    assert [(x["attempt"], x["status"]) for x in safe_attempts] == [(1, "lost"), (2, "succeeded")]
    assert safe_attempts[1]["worker_id"].startswith("b:")
    expiry = leases[safe["id"]]["lease_expires_at_ms"]
    assert expiry + RECONCILE_GRACE_MS <= safe_attempts[0]["finished_at_ms"] <= expiry + LOST_DUE_MS
    assert safe["attempts_spent"] == 2

    # the non-idempotent Run is never tried again: not in the reconcile cycle after it was lost
    wait_db_time(wbed, fragile["finished_at_ms"] + RECONCILE_EVERY_MS + 500,
                 "a reconcile cycle past the fragile run's ending")
    assert [x["status"] for x in wbed.attempts(fragile["id"])] == ["lost"]
    assert wbed.status("t-fragile") == "lost"
    assert b.process is not None and b.process.poll() is None
    wbed.judge()


# -- 2. a worker paused longer than its lease ---------------------------------------------


def test_worker_sigstop_longer_than_the_lease_is_fenced(wbed: WorkerBed) -> None:
    """Two workers are frozen (SIGSTOP) while their commands run.

    a is frozen until its 5 s lease has expired by the database clock (longer than its lease
    but shorter than lease + grace): on SIGCONT it kills its command (self-fence) before the
    reconciler has settled the Attempt; the idempotent Run is then lost and retried (by a or
    b) and succeeds.

    c is frozen until the reconciler has marked its Attempt lost; its command completed
    meanwhile. On SIGCONT its late completion must not land: it is refused (and recorded as
    attempt.late_callback_ignored) or dropped by the self-fence. Never two processes of one
    Run at once."""
    wbed.task("long", first_ticks=100, ticks=5, idempotent=True,
              retry=RetryPolicy(max_attempts=2, backoff_ms=100, max_backoff_ms=100))
    wbed.task("short", ticks=15)
    wbed.trigger("t-long", "long", at_ms=wbed.next_second())
    wbed.start_control().wait_ready()
    a = wbed.worker("a", slots=1)
    long_run = wait_for(lambda: wbed.running_on("t-long", "a"), "the long command to run on a", 15)
    c = wbed.worker("c", slots=1)
    # due only now, with a's one slot taken: c alone can take it (published with the long
    # one, both could be queued by the time a was ready, and a took either)
    wbed.trigger("t-short", "short", at_ms=wbed.next_second())
    short = wait_for(lambda: wbed.running_on("t-short", "c"), "the short command to run on c", 15)
    c.freeze()
    a.freeze()
    b = wbed.worker("b", slots=2)
    assert wbed.status("t-long") == "running"  # b takes nothing while the lease holds

    def lease_expired() -> bool:  # (read afresh: a renewal in flight at the stop may land)
        [attempt] = wbed.attempts(long_run["id"])
        return bool(wbed.bed.now() > attempt["lease_expires_at_ms"])

    wait_for(lease_expired, "a's lease to expire while it is frozen", WORKER_LEASE_MS / 1000 + 10)
    long_run = wbed.run_of("t-long")
    assert long_run is not None and long_run["status"] == "running", long_run
    a.signal(signal.SIGCONT)
    resumed_at = wbed.bed.now()

    def killed() -> Process | None:
        found = processes_of(wbed, long_run["id"])
        return found[0] if found and not found[0].alive() else None

    first = wait_for(killed, "a to kill its command", 5)
    assert first.end_ms is None  # killed, not completed
    assert first.last_ms <= resumed_at + 1_000
    wait_for(lambda: wbed.status("t-long") == "succeeded", "the long run to be retried", 25)
    attempts = wbed.attempts(long_run["id"])
    assert [(x["attempt"], x["status"]) for x in attempts] == [(1, "lost"), (2, "succeeded")]
    # killed by its own worker before the reconciler declared the Attempt lost
    assert first.last_ms + DEATH_MARGIN_MS <= attempts[0]["finished_at_ms"]
    assert "leases not renewed" in a.log.read_text() or "lease lost" in a.log.read_text()

    # c: frozen until its Attempt is lost; its command has completed by then
    wait_for(lambda: wbed.status("t-short") == "lost", "c's attempt to be lost", 20)
    done = processes_of(wbed, short["id"])
    assert len(done) == 1 and done[0].end_ms is not None
    c.signal(signal.SIGCONT)
    late = wait_for(lambda: [e for e in wbed.events(short["id"])
                             if e["type"] == "attempt.late_callback_ignored"]
                    or "stopping its command" in c.log.read_text(),
                    "c to notice it was fenced out", 10)
    if isinstance(late, list):
        assert late[0]["payload"]["write"] == "finish"
    wait_for(lambda: worker_status(c)["running"] == 0, "c to let go of its fenced-out command", 10)
    assert wbed.status("t-short") == "lost"
    assert [x["status"] for x in wbed.attempts(short["id"])] == ["lost"]
    assert b.process is not None and b.process.poll() is None
    wbed.judge()


# -- 3. backends terminated during renewals ------------------------------------------------


def test_worker_recovers_from_terminated_backends(wbed: WorkerBed) -> None:
    """Backends terminated under a worker while a 12 s command runs: twice a renewal is caught
    in flight (held on the Run's row lock, then pg_terminate_backend), and three times every
    connection of the worker (its pool, its lease connection and its listener) is terminated.
    Renewals recover, the Run completes once, and the worker runs the next Run too."""
    wbed.task("steady", ticks=60)
    wbed.task("quick", ticks=3)
    at = wbed.next_second()
    wbed.trigger("t-steady", "steady", at_ms=at)
    wbed.trigger("t-after", "quick", at_ms=at + 11_000)
    wbed.start_control().wait_ready()
    a = wbed.worker("a")
    run = wait_for(lambda: wbed.running_on("t-steady", "a"), "the command to run on a", 15)
    superuser = wbed.bed.db.server.url("postgres", wbed.bed.db.name)

    def everything() -> int:
        rows = wbed.bed.rows(
            "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity "
            "WHERE datname = %s AND application_name LIKE %s", [wbed.bed.db.name, "ql-worker:a%"])
        return sum(1 for r in rows if r["ok"])

    def a_renewal_in_flight() -> str:
        """Hold the Run's row until a's next renewal waits on it, then terminate that backend."""
        with psycopg.connect(superuser, row_factory=dict_row) as holder:
            holder.execute("SELECT id FROM qinglong.runs WHERE id = %s FOR UPDATE", [run["id"]])
            with psycopg.connect(superuser, autocommit=True, row_factory=dict_row) as watch:
                def blocked() -> dict[str, Any] | None:
                    return watch.execute(
                        "SELECT pid, query FROM pg_stat_activity WHERE datname = %s "
                        "AND application_name = 'ql-worker:a:leases' AND wait_event_type = 'Lock'",
                        [wbed.bed.db.name]).fetchone()

                victim = wait_for(blocked, "a renewal to wait on the Run's row", 5, every=0.01)
                watch.execute("SELECT pg_terminate_backend(%s)", [victim["pid"]])
            holder.rollback()
        return str(victim["query"])

    def expiry() -> int:
        value = wbed.attempts(run["id"])[0]["lease_expires_at_ms"]
        assert value is not None, (wbed.attempts(run["id"]), wbed.events(run["id"]))
        return int(value)

    def renewed_since(before: int) -> None:
        wait_for(lambda: expiry() > before, "a renewal to succeed", 4)

    caught = []
    for _ in range(2):
        before = expiry()
        caught.append(a_renewal_in_flight())
        renewed_since(before)
        before = expiry()
        assert everything() >= 1
        renewed_since(before)
    assert all("jsonb" in query for query in caught), caught  # the renewal's statements
    failures = [e for e in a.events() if e.get("event") == "error"
                and str(e.get("message", "")).startswith("renew leases")]
    assert len(failures) >= 2, failures
    wait_for(lambda: wbed.status("t-steady") == "succeeded", "the run to succeed", 15)
    attempts = wbed.attempts(run["id"])
    assert [(x["attempt"], x["status"], x["exit_code"]) for x in attempts] == [(1, "succeeded", 0)]
    assert attempts[0]["worker_id"].startswith("a:")
    done = processes_of(wbed, run["id"])
    assert len(done) == 1 and done[0].end_ms is not None
    assert not [e for e in wbed.events(run["id"]) if e["type"] == "attempt.late_callback_ignored"]
    wait_for(lambda: wbed.status("t-after") == "succeeded", "a to run the next run", 20)
    wait_for(lambda: a.readyz() == 200, "a to be ready", 5)
    wbed.judge()


# -- 4. a cancel that no notification brings ----------------------------------------------


def test_cancel_reaches_a_worker_without_its_listen_connection(wbed: WorkerBed) -> None:
    """Worker a reaches PostgreSQL through the wire proxy, which swallows the traffic of its
    LISTEN connection while `ql run cancel` asks to stop a running idempotent Run: the NOTIFY
    reaches nobody, the next lease renewal carries the cancel, and the Run ends cancelled
    (reason user), never retried."""
    from testkit.pgproxy import PgProxy, ProxyMode

    wbed.task("victim", first_ticks=100, ticks=5, idempotent=True,
              retry=RetryPolicy(max_attempts=3, backoff_ms=100, max_backoff_ms=100))
    wbed.trigger("t-victim", "victim", at_ms=wbed.next_second())
    wbed.start_control().wait_ready()
    with PgProxy(wbed.bed.db.server.host, wbed.bed.db.server.port) as proxy:
        url = proxy.route(wbed.bed.db.url("ql_worker"), sslmode="disable", gssencmode="disable")
        a = wbed.worker("a", url=url)
        run = wait_for(lambda: wbed.running_on("t-victim", "a"), "the command to run on a", 15)
        # Held, not closed: a listener that is cut off reconnects, and a reconnect could hear it.
        proxy.arm(ProxyMode.BLACKHOLE, application_name="ql-worker:a:listen")
        heard = worker_status(a)["notifications"]
        cancel = run_ql(["run", "cancel", run["id"], "--database-url",
                         wbed.bed.db.url("ql_runtime")], timeout=30)
        assert cancel.returncode == 0, cancel.stderr
        wait_for(lambda: wbed.status("t-victim") == "cancelled", "the run to be cancelled", 10)
        ended = wbed.run_of("t-victim")
        assert ended is not None
        # seen at a renewal (every lease/3), not at once by a notification; both instants are
        # the database's, so the cancel command's start-up does not count
        assert ended["finished_at_ms"] - ended["cancel_requested_at_ms"] <= RENEW_EVERY_MS + 3_000
        assert worker_status(a)["notifications"] == heard
        assert proxy.fired.get("blackhole", 0) >= 1  # the listen connection was held
        proxy.disarm()
        wait_db_time(wbed, ended["finished_at_ms"] + RECONCILE_EVERY_MS + 1_000,
                     "a reconcile cycle past the ending (a retry would be queued by then)")
        ended = wbed.run_of("t-victim")
        assert ended is not None and ended["status"] == "cancelled"
        assert ended["cancel_reason"] == "user"
        attempts = wbed.attempts(run["id"])
        assert [(x["attempt"], x["status"]) for x in attempts] == [(1, "cancelled")]
        assert not [e for e in wbed.events(run["id"]) if e["type"] == "run.retry_wait"]
        (process,) = processes_of(wbed, run["id"])
        assert process.end_ms is None and not process.alive()
        wbed.judge()


def test_cancel_of_a_queued_run_ends_it_at_once_and_a_second_cancel_is_refused(
        wbed: WorkerBed) -> None:
    """With no worker running, `ql run cancel` ends a queued Run `cancelled` (reason user)
    at once; cancelling it again is refused with exit 2 and one line, nothing written."""
    wbed.task("idle", ticks=5)
    wbed.trigger("t-idle", "idle", at_ms=wbed.next_second(2))
    wbed.start_control().wait_ready()
    run = wait_status(wbed, "t-idle", "queued", "the run to be queued (no worker)", 15)
    command = ["run", "cancel", run["id"], "--database-url", wbed.bed.db.url("ql_runtime")]
    cancel = run_ql(command, timeout=30)
    assert cancel.returncode == 0, cancel.stderr
    assert wbed.status("t-idle") == "cancelled"
    events = wbed.events(run["id"])
    ending = [e for e in events if e["type"] == "run.cancelled"]
    assert ending[0]["payload"]["cancel_reason"] == "user"
    again = run_ql(command, timeout=30)
    assert again.returncode == 2 and "already ended" in again.stderr, again.stderr
    assert "Traceback" not in again.stderr
    assert len(wbed.events(run["id"])) == len(events)
    # past the audit's settle time, so the occurrence is required
    wait_db_time(wbed, run["scheduled_for_ms"] + AUDIT_SETTLE_MS + 250,
                 "the occurrence to be older than the audit's settle time")
    wbed.judge()


# -- 5. overlap skip across a worker restart ----------------------------------------------


def test_overlap_skip_across_a_worker_restart(wbed: WorkerBed) -> None:
    """A per-second trigger with overlap skip whose Runs last 3 s; its worker is killed and
    started again mid-run. Never two Runs of the trigger at once; every occurrence has a Run,
    and the ones that found another Run in progress end cancelled (reason policy, overlap
    skip, naming the Run in progress)."""
    wbed.task("slow3", ticks=15)
    wbed.trigger("t-skip", "slow3", overlap=Overlap(policy=OverlapPolicy.SKIP))
    wbed.start_control().wait_ready()
    a = wbed.worker("a")
    wait_for(lambda: len([p for p in read_ledger(wbed.ledger) if p.end_ms]) >= 1,
             "a first run to complete", 15)
    wait_for(lambda: any(p.end_ms is None and p.alive() and p.last_ms > p.start_ms
                         for p in read_ledger(wbed.ledger)), "a command in progress (mid-run)", 10)
    a.kill()
    killed_at = wbed.bed.now()
    # back at once under a fresh id: the killed process's id stays registered until its
    # heartbeat is 30 s old, and a restart under it would wait for that
    a.fresh_id_per_start = True
    a.start()
    a.wait_ready()
    # the killed worker's Run holds the trigger until the reconciler settles it
    wait_for(lambda: any(r["status"] == "lost" for r in wbed.runs()), "the killed run to be lost",
             20)
    lost = [r for r in wbed.runs() if r["status"] == "lost"]
    assert len(lost) == 1
    assert lost[0]["finished_at_ms"] - killed_at <= WORKER_LEASE_MS + LOST_DUE_MS
    wait_for(lambda: any(r["status"] == "succeeded" and r["finished_at_ms"] > lost[0]["finished_at_ms"]
                         for r in wbed.runs()), "a run to complete after the restart", 15)
    wbed.disable("t-skip")
    runs = wait_ended(wbed, 15)

    skipped = [r for r in runs if r["status"] == "cancelled"]
    assert len(skipped) >= 5, [r["status"] for r in runs]
    events = wbed.events()
    for run in skipped:
        assert run["cancel_reason"] == "policy", run
        ending = [e for e in events if e["run_id"] == run["id"] and e["type"] == "run.cancelled"]
        assert ending[0]["payload"]["overlap"] == "skip", ending
        assert ending[0]["payload"]["previous_run"] in {r["id"] for r in runs}
    statuses = {r["status"] for r in runs}
    assert statuses <= {"succeeded", "cancelled", "lost"}, statuses
    # never two Runs of the trigger in progress at once: by the database ...
    attempts = wbed.attempts()
    spans = sorted((a_["started_at_ms"], a_["finished_at_ms"], a_["run_id"])
                   for a_ in attempts if a_["started_at_ms"] is not None)
    for (_, end, first), (begin, _, second) in itertools.pairwise(spans):
        assert end <= begin, f"runs {first} and {second} overlap"
    # ... and by the commands themselves
    assert not overlaps(read_ledger(wbed.ledger), {a_["id"]: a_ for a_ in attempts})
    wbed.judge()


# -- 6. a retry storm ---------------------------------------------------------------------


def test_retry_storm_ends_every_run_failed_after_three_attempts(wbed: WorkerBed) -> None:
    """20 triggers fire together a task that always fails (max 3 attempts, 100 ms backoff),
    run by 2 workers: every Run ends failed after exactly 3 attempts, none stays behind in
    retry_wait, queued or running."""
    wbed.task("doomed", ticks=1, exit_code=3,
              retry=RetryPolicy(max_attempts=3, backoff_ms=100, max_backoff_ms=200))
    at = wbed.next_second()
    for n in range(20):
        wbed.trigger(f"t-doomed-{n:02d}", "doomed", at_ms=at)
    wbed.start_control().wait_ready()
    wbed.worker("a")
    wbed.worker("b")
    wait_for(lambda: len(wbed.runs()) == 20, "20 admissions", 15)
    runs = wait_ended(wbed, 45)
    assert len(runs) == 20
    assert {r["status"] for r in runs} == {"failed"}
    assert {r["attempts_spent"] for r in runs} == {3}
    attempts = wbed.attempts()
    assert len(attempts) == 60
    for run in runs:
        mine = [x for x in attempts if x["run_id"] == run["id"]]
        assert [(x["attempt"], x["status"], x["exit_code"]) for x in mine] == [
            (1, "failed", 3), (2, "failed", 3), (3, "failed", 3)], mine
        waits = [e for e in wbed.events(run["id"]) if e["type"] == "run.retry_wait"]
        assert len(waits) == 2
    processes = read_ledger(wbed.ledger)
    assert len(processes) == 60 and all(p.end_ms is not None for p in processes)
    workers = {x["worker_id"].split(":")[0] for x in attempts}
    assert workers == {"a", "b"}
    assert not wbed.bed.rows("SELECT id FROM qinglong.runs WHERE status IN "
                             "('queued', 'dispatching', 'running', 'retry_wait')")
    wbed.judge()


# -- 7. drain on SIGTERM, hard stop on a second SIGTERM -----------------------------------


def test_drain_requeues_without_spending_an_attempt_and_a_second_sigterm_stops_at_once(
        wbed: WorkerBed) -> None:
    """SIGTERM a worker whose command outlasts its 1 s drain timeout: the command is stopped
    and the Run queued again without spending an attempt (its task allows one attempt), and
    another worker completes it. SIGTERM another worker twice: it stops at once, killing its
    command and writing nothing more; the reconciler settles that Run (lost)."""
    wbed.task("drainable", first_ticks=150, ticks=5)
    wbed.trigger("t-drain", "drainable", at_ms=wbed.next_second())
    wbed.start_control().wait_ready()
    a = wbed.worker("a", slots=1, drain_timeout_ms=1_000)
    drained = wait_for(lambda: wbed.running_on("t-drain", "a"), "the command to run on a", 15)
    c = wbed.worker("c", slots=1, drain_timeout_ms=20_000)
    wbed.trigger("t-hard", "drainable", at_ms=wbed.next_second())  # due now: only c is free
    hard = wait_for(lambda: wbed.running_on("t-hard", "c"), "the command to run on c", 15)
    b = wbed.worker("b", slots=2)

    # drain: a stops within drain timeout + kill grace + a little
    termed_at = wbed.bed.now()  # before the signal: a slow read after it would hide drain time
    a.signal(signal.SIGTERM)
    assert a.process is not None
    assert a.process.wait(10) == 0
    stopped_after = wbed.bed.now() - termed_at
    assert stopped_after <= 1_000 + 2_000 + 3_000, stopped_after
    assert "1 commands stopped and queued again" in a.log.read_text()
    first = processes_of(wbed, drained["id"])[0]
    assert first.end_ms is None and not first.alive()
    assert termed_at + 800 <= first.last_ms + DEATH_MARGIN_MS  # it had its drain time
    wait_for(lambda: wbed.status("t-drain") == "succeeded", "b to complete the drained run", 15)
    run = wbed.run_of("t-drain")
    assert run is not None and run["attempts_spent"] == 1
    attempts = wbed.attempts(run["id"])
    assert [(x["attempt"], x["status"], x["error_code"]) for x in attempts] == [
        (1, "cancelled", "INTERRUPTED"), (2, "succeeded", None)]
    assert attempts[1]["worker_id"].startswith("b:")
    waits = [e for e in wbed.events(run["id"]) if e["type"] == "run.retry_wait"]
    assert len(waits) == 1 and waits[0]["payload"]["attempts_spent"] == 0
    assert waits[0]["payload"]["reason"] == "drain"

    # hard stop: the second SIGTERM ends c at once, its command with it
    c.signal(signal.SIGTERM)
    wait_for(lambda: "draining" in c.log.read_text(), "c to start draining", 5)
    c.signal(signal.SIGTERM)
    second_at = wbed.bed.now()
    assert c.process is not None
    assert c.process.wait(10) == 130
    assert wbed.bed.now() - second_at <= 3_000
    (process,) = processes_of(wbed, hard["id"])
    assert process.end_ms is None  # it never ended by itself
    # SIGKILL is sent before the worker exits, but the command's death is the kernel's to
    # finish: wait for it (a clean clone under load once read its environment a moment
    # before), then check from its own ticks that it stopped at the second signal
    wait_for(lambda: not process.alive(), "the SIGKILLed command to be gone", 5)
    (process,) = processes_of(wbed, hard["id"])  # every tick it wrote
    assert process.end_ms is None and process.last_ms <= second_at + DEATH_MARGIN_MS
    assert wbed.status("t-hard") == "running"  # nothing written: the reconciler settles it
    wait_for(lambda: wbed.status("t-hard") == "lost", "the hard-stopped run to be lost", 20)
    assert [x["status"] for x in wbed.attempts(hard["id"])] == ["lost"]
    assert b.process is not None and b.process.poll() is None
    wbed.judge()


def test_a_busy_worker_answers_every_sigterm(wbed: WorkerBed) -> None:
    """A worker whose threads are busy (commands every second, renewals, log chunks) stops
    within its drain bound on each of several SIGTERMs, whichever thread the kernel hands the
    signal to: the main thread must never sleep through it."""
    wbed.task("short", ticks=3)
    wbed.trigger("t-every", "short")
    wbed.trigger("t-every-2", "short")
    wbed.start_control().wait_ready()
    for round_ in range(4):
        worker = wbed.worker(f"w{round_}", slots=2, drain_timeout_ms=1_000)
        wait_for(lambda: any(str(a["worker_id"]).startswith(f"w{round_}:")  # noqa: B023
                             for a in wbed.attempts()), f"w{round_} to run a command", 15)
        worker.signal(signal.SIGTERM)
        assert worker.process is not None
        assert worker.process.wait(1 + 2 + 5) == 0, worker.log.read_text()[-2_000:]
    for trigger_id in list(wbed.triggers):
        wbed.disable(trigger_id)
    wbed.worker("last", slots=4)
    wait_ended(wbed, 30)
    wbed.judge()


# -- a worker partitioned from PostgreSQL ---------------------------------------------------


def test_a_worker_cut_off_from_postgres_stops_its_command_before_the_run_moves_on(
        wbed: WorkerBed) -> None:
    """Worker a reaches PostgreSQL through the wire proxy, which swallows all its traffic
    (a partition: no RST, no FIN) while its command runs. a cannot renew: its watchdog kills
    the command at 80 % of the lease, before the reconciler marks the Attempt lost at lease +
    grace; the idempotent Run is retried on worker b and succeeds. When the partition heals,
    a's late writes land nowhere, and a takes work again."""
    from testkit.pgproxy import PgProxy, ProxyMode

    wbed.task("long", first_ticks=100, ticks=5, idempotent=True,
              retry=RetryPolicy(max_attempts=2, backoff_ms=100, max_backoff_ms=100))
    at = wbed.next_second()
    wbed.trigger("t-long", "long", at_ms=at)
    wbed.start_control().wait_ready()
    with PgProxy(wbed.bed.db.server.host, wbed.bed.db.server.port) as proxy:
        url = proxy.route(wbed.bed.db.url("ql_worker"), sslmode="disable", gssencmode="disable")
        a = wbed.worker("a", slots=1, url=url)
        run = wait_for(lambda: wbed.running_on("t-long", "a"), "the long command to run on a", 15)
        proxy.arm(ProxyMode.BLACKHOLE)
        cut_at = wbed.bed.now()
        b = wbed.worker("b", slots=1)

        def killed() -> Process | None:
            found = processes_of(wbed, run["id"])
            return found[0] if found and not found[0].alive() else None

        first = wait_for(killed, "a to kill its command while cut off", WORKER_LEASE_MS / 1000 + 3)
        assert first.end_ms is None  # killed, not completed
        assert first.last_ms - cut_at <= WORKER_LEASE_MS  # before its lease ran out
        wait_for(lambda: wbed.status("t-long") == "succeeded", "the run to be retried on b", 30)
        attempts = wbed.attempts(run["id"])
        assert [(x["attempt"], x["status"]) for x in attempts] == [(1, "lost"), (2, "succeeded")]
        assert attempts[1]["worker_id"].startswith("b:")
        assert first.last_ms + DEATH_MARGIN_MS <= attempts[0]["finished_at_ms"]
        proxy.disarm()
        wait_for(lambda: a.readyz() == 200, "a to be ready again after the partition", 30)
        # a's held writes have flowed; it let go of the attempt it lost
        wait_for(lambda: worker_status(a)["running"] == 0, "a to let go of its lost attempt", 10)
    del b
    assert wbed.status("t-long") == "succeeded"  # nothing a wrote late changed the Run
    wbed.judge()


# -- PostgreSQL crashes and restarts under a running command ---------------------------------


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[tuple[WorkerBed, EmbeddedPostgres]]:
    """A WorkerBed on a PostgreSQL of its own (fsync on), which the test may crash."""
    server = EmbeddedPostgres(base_dir=tmp_path / "primary", fsync=True).start()
    try:
        fault_bed = prepare(server, tmp_path)
        harness = WorkerBed(bed=fault_bed, ledger=tmp_path / "commands.ledger")
        try:
            yield harness, server
        finally:
            harness.close()
            fault_bed.close()
    finally:
        server.cleanup()


def test_a_running_command_rides_out_a_postgres_crash_and_restart(
        own_server: tuple[WorkerBed, EmbeddedPostgres]) -> None:
    """PostgreSQL is crashed (immediate stop, no checkpoint) just after a worker renewed the
    lease of a running command, and started again: the next renewal fails on the connection
    the crash cut, renewals resume once the database is back, the command is not killed, the
    Run ends succeeded in its one attempt, and an occurrence due after the restart runs too.

    Surviving follows from the outage's bound, not from luck. Commands are killed once the
    leases have gone unrenewed for 80 % of the lease (12 s of 15 s). Renewals come every
    third of the lease (5 s), on a connection of their own that is opened again at each try
    (every second while they fail), so the first to succeed after the crash comes by
    max(5 s, the outage + 1 s) plus a connect and a renewal: under 9.5 s for an outage under
    8 s. The command runs 20 s, so that renewal lands while it still runs."""
    wbed, server = own_server
    wbed.task("long", first_ticks=100, ticks=100)
    wbed.task("short", ticks=2)
    at = wbed.next_second()
    wbed.trigger("t-long", "long", at_ms=at)
    wbed.start_control().wait_ready()
    a = Worker("a", wbed.bed.db.url("ql_worker"), wbed.bed.tmp, slots=2, lease_ms=15_000,
               drain_timeout_ms=5_000, poll_ms=200)
    wbed.workers.append(a)
    a.start().wait_ready()
    run = wait_for(lambda: wbed.running_on("t-long", "a"), "the long command to run on a", 15)

    def expiry() -> int:
        return int(wbed.attempts(run["id"])[0]["lease_expires_at_ms"])

    leased = expiry()
    renewed = wait_for(lambda: expiry() > leased and expiry(), "a renewal of the lease", 10)
    wbed.trigger("t-after", "short", at_ms=wbed.next_second(ahead_s=12))  # due after the restart
    server.crash()
    down_at = time.monotonic()
    server.start()
    outage_s = time.monotonic() - down_at
    assert outage_s < 8, f"the restart took {outage_s:.1f} s: too long for this test's lease"
    with contextlib.suppress(psycopg.Error, ConnectionLost):  # the test's own session died too
        wbed.bed.rows("SELECT 1")
    wait_for(lambda: expiry() > renewed, "the lease to be renewed after the restart", 12)
    wait_status(wbed, "t-long", "succeeded", "the long run to succeed after the restart", 30)
    wait_status(wbed, "t-after", "succeeded", "an occurrence due after the restart to run", 30)
    [attempt] = wbed.attempts(run["id"])
    assert attempt["status"] == "succeeded" and attempt["lease_generation"] >= 1
    [process] = processes_of(wbed, run["id"])
    assert process.end_ms is not None  # it ran to its end: never killed
    events = a.events()
    assert [e for e in events if e.get("event") == "error" and e.get("source") == "executor"
            and e.get("code") == "QL_CONNECTION_LOST"], "no renewal failed across the crash"
    assert not [e for e in events if e.get("code") == "QL_LEASE_LOST"]
    assert a.process is not None and a.process.poll() is None
    wbed.judge()
