"""The edge and standalone profiles: SQLite, the local scheduler and the executor.

Start order: ``open``: schema check -> single-serve lock -> log directory; then ``start``:
registration -> settle what a previous server left running -> executor -> scheduler. `ql serve
--http` binds its port between the two, so a port in use stops it before anything is admitted
or run. Stop order: scheduler (drain the cycle) -> executor (drain running jobs, then cancel
what is left) -> database -> lock.

A storage error that cannot heal (a damaged database file) stops the server: `failed` is set
and `failure` says why, so `ql serve` exits non-zero instead of logging the same error forever.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from qinglong.clock import Clock
from qinglong.diagnostics import Diagnostic
from qinglong.domain.decision import Decision, check_grace
from qinglong.domain.retention import DEFAULT_RETENTION_DAYS, check_retention_days
from qinglong.domain.schedule import ScheduleCandidate, ScheduleClaim, check_budget
from qinglong.errors import DatabaseCorrupt, InvalidConfig, QinglongError
from qinglong.execution.executor import Executor, RunFinished
from qinglong.execution.identity import Identity
from qinglong.execution.logs import (
    DEFAULT_LOG_BYTES,
    DEFAULT_LOG_RETENTION_DAYS,
    MAX_LOG_RETENTION_DAYS,
    private_dir,
    prune_log_dir,
)
from qinglong.execution.reconciler import Reconciler, ReconcileReport
from qinglong.loops import PacedLoop, StopResult, check_interval
from qinglong.metrics import (
    Caps,
    ExecutionMetrics,
    QueueMetrics,
    RescueMetrics,
    SchedulerMetrics,
    new_registry,
    publish,
    withdraw,
)
from qinglong.notify.wiring import NotifyService, notify_service
from qinglong.profiles.lease_recording import LeaseRecordingRunStore
from qinglong.profiles.serve_lock import ServeLock
from qinglong.scheduler.coordinator import Coordinator
from qinglong.scheduler.report import CycleReport
from qinglong.service.queue import read_queue
from qinglong.storage.admission import RequestAdmissions, ScheduleStore
from qinglong.storage.admission.params import CommitOutcome, CommitResult
from qinglong.storage.deps import DepStore
from qinglong.storage.flows.start import start_occurrence
from qinglong.storage.instances import InstanceStore
from qinglong.storage.kernel import Database
from qinglong.storage.notify import NotifyStore
from qinglong.storage.retention import open_retention
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.flow_store import FlowStore
from qinglong.storage.runs.params import RescuedAttempt
from qinglong.storage.scripts import ScriptStore
from qinglong.storage.sqlite.connection import (
    SqliteDatabase,
    sqlite_path_from_url,
)
from qinglong.storage.sqlite.driver import open_sqlite
from qinglong.storage.sqlite.migrate import check_schema
from qinglong.storage.wakeups import Wakeups

# `ql serve` reads from here the bounds of its log options and the file a URL names, too.
__all__ = ["DEFAULT_LOG_BYTES", "DEFAULT_LOG_RETENTION_DAYS", "LOCAL_LEASE_MS",
           "MAX_LOG_RETENTION_DAYS", "PROFILES", "LocalApp", "LocalMetrics", "LocalObserver",
           "LocalServeConfig", "sqlite_path_from_url"]

INSTANCE_ID = "serve"  # one `ql serve` per database file at a time
LOCAL_RENEW_EVERY_S = 1.0  # a cancel request is seen within a second
LOCAL_LEASE_MS = 15_000  # an executor gone this long (plus the grace) is declared lost
# How long a decision may wait for its commit: one process serves the file, so a claim is
# only ever taken over by this process's next cycle, after a commit that did not happen.
LOCAL_CLAIM_LEASE_MS = 30_000
RECONCILE_INTERVAL_S = 2.0
HEARTBEAT_INTERVAL_S = 5.0
FATAL_CODES = frozenset({DatabaseCorrupt.code})


@dataclass(frozen=True, slots=True)
class LocalProfile:
    name: str
    budget: int  # decisions per cycle (a saturated cycle is followed by the next at once)
    interval_s: float
    batch: int  # decisions per BEGIN IMMEDIATE commit (a commit syncs the file)


STANDALONE = LocalProfile("standalone", budget=256, interval_s=1.0, batch=256)
EDGE = LocalProfile("edge", budget=4, interval_s=5.0, batch=4)
PROFILES = {profile.name: profile for profile in (STANDALONE, EDGE)}


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalServeConfig:
    database_path: Path
    profile: LocalProfile = STANDALONE
    grace_ms: int = 30_000
    budget: int | None = None
    interval_s: float | None = None
    concurrency: int = 4
    log_dir: Path | None = None
    log_max_bytes: int = DEFAULT_LOG_BYTES
    log_retention_days: int = DEFAULT_LOG_RETENTION_DAYS
    retention_days: int = DEFAULT_RETENTION_DAYS  # Run events (docs/retention.md); 0: for ever
    drain_timeout_s: float = 10.0
    stop_timeout_s: float = 10.0
    metrics_trigger_labels: int | None = None  # None: QL_METRICS_TRIGGER_LABELS or 100
    labels: Mapping[str, str | None] = field(default_factory=dict)  # placement (its executor's)
    nice: int = 0  # every command's niceness
    run_as: str | None = None  # the user commands run as (a server started as root)
    deps_dir: Path | None = None  # dependency environments (default: <database>.deps)

    def identity(self) -> Identity:
        """How commands are started (InvalidConfig for a --run-as this process cannot use)."""
        return Identity.of(self.nice, self.run_as)

    def validated(self) -> LocalServeConfig:
        check_grace(self.grace_ms)
        check_budget(self.effective_budget)
        check_interval(self.effective_interval_s)
        check_retention_days(self.retention_days)
        self.identity()
        if not 0 <= self.drain_timeout_s <= 3600:
            raise InvalidConfig("drain-timeout", "must be between 0 s and 1 h")
        return self

    @property
    def effective_budget(self) -> int:
        return self.budget if self.budget is not None else self.profile.budget

    @property
    def effective_interval_s(self) -> float:
        return self.interval_s if self.interval_s is not None else self.profile.interval_s

    @property
    def effective_log_dir(self) -> Path:
        """Absolute, so log paths recorded in Runs work from any directory."""
        if self.log_dir is not None:
            return self.log_dir.absolute()
        path = self.database_path.absolute()
        return path.with_name(path.name + ".logs")

    @property
    def effective_deps_dir(self) -> Path:
        """Where projects' dependency environments are cached (docs/dependencies.md)."""
        if self.deps_dir is not None:
            return self.deps_dir.absolute()
        path = self.database_path.absolute()
        return path.with_name(path.name + ".deps")


class LocalObserver(Protocol):
    def admitted(self, candidate: ScheduleCandidate, decision: Decision, result: CommitResult) -> None: ...
    def finished(self, finished: RunFinished) -> None: ...
    def reconciled(self, attempt: RescuedAttempt) -> None: ...
    def diagnostic(self, diagnostic: Diagnostic) -> None: ...


def check_log_dir(path: Path) -> None:
    """Create the log directory and prove that a file can be written in it."""
    probe = path / f".ql-write-check-{os.getpid()}"
    try:
        private_dir(path)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise InvalidConfig("log-dir", f"cannot write log files in {str(path)!r} "
                                       f"({exc.strerror or exc})") from None


class LocalMetrics:
    """`ql serve`'s registry: the scheduler families of `ql control`, the execution families
    of `ql worker`, lease takeovers and queue depth (qinglong.metrics), shown by the /metrics
    of its HTTP API (``--http``)."""

    def __init__(self, clock: Clock, label_limit: int | None = None) -> None:
        self.registry = new_registry()
        self.caps = Caps(self.registry, label_limit)
        self.scheduler = SchedulerMetrics(self.registry, self.caps.triggers)
        self.execution = ExecutionMetrics(self.registry, self.caps.runs)
        self.rescue = RescueMetrics(self.registry)
        self.queue = QueueMetrics(self.registry, clock.monotonic)


class LocalApp:
    def __init__(self, config: LocalServeConfig, clock: Clock, observer: LocalObserver) -> None:
        self._config = config.validated()
        self._clock = clock
        self._observer = observer
        self.metrics = LocalMetrics(clock, self._config.metrics_trigger_labels)
        self.metrics.execution.capacity.set(self._config.concurrency)
        self._file: SqliteDatabase | None = None
        self._db: Database | None = None
        self._lock = ServeLock(config.database_path)
        self._lifecycle: PacedLoop[CycleReport] | None = None
        self._executor: Executor | None = None
        self._reconciling: PacedLoop[ReconcileReport] | None = None
        self._instances: InstanceStore | None = None
        self._notifying: NotifyService | None = None  # the notification dispatcher
        self._beat_at = 0.0
        self.failed = threading.Event()
        self.failure: Diagnostic | None = None
        # the process's one notifier: a commit here (the scheduler's, the HTTP API's)
        # wakes the loop it concerns at once (storage/wakeups.py)
        self.wakeups = Wakeups()

    def open(self) -> None:
        """The database, its schema, the single-serve lock and the log directory: what must
        hold before anything else starts (on failure it has already stopped what it opened)."""
        if self._db is not None:
            return
        try:
            file = SqliteDatabase(self._config.database_path)
            self._file = file
            check_schema(file)
            self._db = open_sqlite(file, self._clock, self.wakeups.publish)
            self._lock.acquire()
            check_log_dir(self._config.effective_log_dir)
        except BaseException:
            self.stop(clean=False)
            raise

    def start(self) -> list[RescuedAttempt]:
        config = self._config
        self.open()
        db = self._db
        assert db is not None
        try:
            self._instances = InstanceStore(db)
            # the lock proves no other `ql serve` runs: a registration it left is taken over
            self._instances.instance_start(INSTANCE_ID, "serve", socket.gethostname(),
                                           os.getpid(), locked=True, labels=config.labels)
            run_store = LeaseRecordingRunStore(db, actor_id=config.profile.name,
                                               targets=self.metrics.execution.targets)
            executor = Executor(
                run_store,
                self._clock,
                owner=f"{config.profile.name}:{os.getpid()}",
                lease_ms=LOCAL_LEASE_MS,
                log_dir=config.effective_log_dir,
                concurrency=config.concurrency,
                log_max_bytes=config.log_max_bytes,
                diagnostics=self._diagnostic,
                on_finished=self._finished,
                renew_every_s=LOCAL_RENEW_EVERY_S,
                labels=config.labels,
                identity=config.identity(),
                scripts=ScriptStore(db).content,
                # a subscription's pull imports into this same file (docs/subscriptions.md)
                repos_url=f"sqlite:///{self._config.database_path.absolute()}",
                deps=DepStore(db).recent, deps_dir=config.effective_deps_dir,
            )
            self.metrics.execution.watch_slots(executor.active)
            reconciled = executor.recover()
            for attempt in reconciled:
                self._observer.reconciled(attempt)
            coordinator = Coordinator(
                ScheduleStore(db, actor_id=config.profile.name, start_flow=start_occurrence),
                owner=f"{config.profile.name}:{os.getpid()}",
                lease_ms=LOCAL_CLAIM_LEASE_MS,
                budget=config.effective_budget,
                batch=min(config.profile.batch, config.effective_budget),
                grace_ms=config.grace_ms,
                on_committed=self._committed,
                diagnostics=self._diagnostic,
            )
            lifecycle = PacedLoop(
                lambda: coordinator.run_cycle(lifecycle.stop_requested),  # read when a cycle runs
                interval_s=config.effective_interval_s,
                stop_timeout_s=config.stop_timeout_s,
                diagnostics=self._diagnostic,
                on_report=self._report,
            )
            log_dir = config.effective_log_dir
            retention_ms = config.log_retention_days * 86_400_000
            history = open_retention(db, self._clock, days=config.retention_days)

            def prune() -> int:
                return prune_log_dir(log_dir, self._clock.now_ms() - retention_ms) + history()

            reconciler = Reconciler(run_store, on_rescued=lambda attempt: self._rescued(
                                        executor, attempt),
                                    on_promoted=lambda _runs: executor.poke(), prune=prune,
                                    expire_flows=FlowStore(db, RequestAdmissions(db),
                                                           actor_id=config.profile.name).flows_expire)
            reconciling: PacedLoop[ReconcileReport] = PacedLoop(
                lambda: self._reconcile(reconciler, run_store), interval_s=RECONCILE_INTERVAL_S,
                stop_timeout_s=config.stop_timeout_s, diagnostics=self._diagnostic,
                name="ql-reconciler")
            self._executor = executor
            self._lifecycle = lifecycle
            # this process's commits (its HTTP API's too: open it with wakeups.publish) wake
            # the loop that waits for them
            self.wakeups.subscribe("runs", lambda _payload: executor.poke())
            self.wakeups.subscribe("schedules", lambda _payload: lifecycle.wake())
            self._reconciling = reconciling
            notify = NotifyStore(db)
            notify.outbox_release()  # under the lock: a previous server's sends are due again
            self._notifying = notify_service(notify, self._clock, owner=INSTANCE_ID,
                                             stop_timeout_s=config.stop_timeout_s,
                                             diagnostics=self._diagnostic)
            executor.start()
            reconciling.start()
            self._notifying.start()
            lifecycle.start()
            publish(self.metrics.registry)  # on the /metrics of `ql serve --http`
        except BaseException:
            self.stop(clean=False)
            raise
        return reconciled

    def _rescued(self, executor: Executor, attempt: RescuedAttempt) -> None:
        executor.fence(attempt.attempt_id)  # its command may still run in this process
        self.metrics.rescue.observe(attempt)
        self._observer.reconciled(attempt)

    def _reconcile(self, reconciler: Reconciler, runs: RunStore) -> ReconcileReport:
        report = reconciler.run_cycle()
        # the queue gauge is a hint: a failed reading keeps the last one
        with contextlib.suppress(QinglongError):
            self.metrics.queue.refresh(lambda: read_queue(runs))
        return report

    def _finished(self, finished: RunFinished) -> None:
        self.metrics.execution.observe(finished.run_id, finished.trigger_id, finished.status,
                                       finished.duration_ms)
        self._observer.finished(finished)

    def _diagnostic(self, diagnostic: Diagnostic) -> None:
        self.metrics.scheduler.errors.labels(diagnostic.code).inc()
        self._observer.diagnostic(diagnostic)
        if diagnostic.code in FATAL_CODES and not self.failed.is_set():
            self.failure = diagnostic
            self.failed.set()

    def _report(self, report: CycleReport) -> None:
        del report
        self.metrics.scheduler.cycles.inc()
        now = self._clock.monotonic()
        if self._instances is not None and now - self._beat_at >= HEARTBEAT_INTERVAL_S:
            self._beat_at = now
            try:
                self._instances.instance_beat(INSTANCE_ID)
            except QinglongError as exc:
                self._diagnostic(Diagnostic(source="serve", code=exc.code, message=exc.message))

    def _committed(self, claim: ScheduleClaim, decision: Decision, result: CommitResult) -> None:
        candidate = claim.candidate
        self.metrics.scheduler.committed(candidate.project_id, candidate.trigger_id, decision,
                                         result)
        if result.outcome is CommitOutcome.ADMITTED and self._executor is not None:
            self._executor.poke()
        self._observer.admitted(candidate, decision, result)

    def stop(self, *, clean: bool = True) -> StopResult:
        withdraw(self.metrics.registry)
        result = StopResult.STOPPED
        if self._lifecycle is not None:
            result = self._lifecycle.stop()
        if self._reconciling is not None:
            self._reconciling.stop()
        if self._notifying is not None:
            self._notifying.stop()
        if self._executor is not None:
            self._executor.stop(self._config.drain_timeout_s)
        if self._instances is not None and clean and not self.failed.is_set():
            try:
                self._instances.instance_stop(INSTANCE_ID)
            except QinglongError as exc:
                self._observer.diagnostic(Diagnostic(source="serve", code=exc.code,
                                                     message=exc.message))
        self._instances = None
        if self._db is not None:
            self._db.close()  # closes the file
            self._db = None
        elif self._file is not None:
            self._file.close()
        self._file = None
        self._lock.release()
        return result
