"""The edge and standalone profiles: SQLite, the local scheduler and the local executor.

Start order: schema check -> single-serve lock -> reconcile interrupted attempts ->
executor -> scheduler. Stop order: scheduler (drain the cycle) -> executor (drain
running jobs, then cancel what is left) -> database.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from qinglong.clock import Clock
from qinglong.domain.decision import Decision, check_grace
from qinglong.domain.schedule import ScheduleCandidate
from qinglong.errors import AlreadyRunning, InvalidConfig
from qinglong.execution.local import LocalExecutor, RunFinished
from qinglong.execution.logs import DEFAULT_LOG_BYTES
from qinglong.scheduler.diagnostics import Diagnostic
from qinglong.scheduler.lifecycle import SchedulerLifecycle, StopResult, check_interval
from qinglong.scheduler.local import LocalCoordinator
from qinglong.scheduler.report import check_budget
from qinglong.storage.ports import CommitOutcome, CommitResult, ReconciledAttempt
from qinglong.storage.sqlite.connection import SqliteDatabase
from qinglong.storage.sqlite.migrate import check_schema
from qinglong.storage.sqlite.runs import SqliteRunStore
from qinglong.storage.sqlite.scheduling import SqliteScheduleStore


@dataclass(frozen=True, slots=True)
class LocalProfile:
    name: str
    budget: int
    interval_s: float


STANDALONE = LocalProfile("standalone", budget=16, interval_s=1.0)
EDGE = LocalProfile("edge", budget=4, interval_s=5.0)
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
    drain_timeout_s: float = 10.0
    stop_timeout_s: float = 10.0

    def validated(self) -> LocalServeConfig:
        check_grace(self.grace_ms)
        check_budget(self.effective_budget)
        check_interval(self.effective_interval_s)
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
        if self.log_dir is not None:
            return self.log_dir
        return self.database_path.with_name(self.database_path.name + ".logs")


class LocalObserver(Protocol):
    def admitted(self, candidate: ScheduleCandidate, decision: Decision, result: CommitResult) -> None: ...
    def finished(self, finished: RunFinished) -> None: ...
    def reconciled(self, attempt: ReconciledAttempt) -> None: ...
    def diagnostic(self, diagnostic: Diagnostic) -> None: ...


class _ServeLock:
    """An exclusive flock beside the database: one `ql serve` per database file."""

    def __init__(self, database_path: Path) -> None:
        self._path = database_path.with_name(database_path.name + ".serve.lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise AlreadyRunning(
                f"another `ql serve` is already serving {str(self._path.with_suffix(''))!r}"
            ) from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class LocalApp:
    def __init__(self, config: LocalServeConfig, clock: Clock, observer: LocalObserver) -> None:
        self._config = config.validated()
        self._clock = clock
        self._observer = observer
        self._db: SqliteDatabase | None = None
        self._lock = _ServeLock(config.database_path)
        self._lifecycle: SchedulerLifecycle | None = None
        self._executor: LocalExecutor | None = None

    def start(self) -> list[ReconciledAttempt]:
        config = self._config
        db = SqliteDatabase(config.database_path)
        self._db = db
        try:
            check_schema(db)
            self._lock.acquire()
            run_store = SqliteRunStore(db, self._clock, actor_id=config.profile.name)
            executor = LocalExecutor(
                run_store,
                self._clock,
                log_dir=config.effective_log_dir,
                concurrency=config.concurrency,
                log_max_bytes=config.log_max_bytes,
                diagnostics=self._observer.diagnostic,
                on_finished=self._observer.finished,
            )
            reconciled = executor.recover()
            for attempt in reconciled:
                self._observer.reconciled(attempt)
            coordinator = LocalCoordinator(
                SqliteScheduleStore(db, self._clock, actor_id=config.profile.name),
                self._clock,
                budget=config.effective_budget,
                grace_ms=config.grace_ms,
                on_committed=self._committed,
                diagnostics=self._observer.diagnostic,
            )
            lifecycle = SchedulerLifecycle(
                lambda: coordinator.run_cycle(lifecycle.stop_requested),  # read when a cycle runs
                interval_s=config.effective_interval_s,
                stop_timeout_s=config.stop_timeout_s,
                diagnostics=self._observer.diagnostic,
            )
            self._executor = executor
            self._lifecycle = lifecycle
            executor.start()
            lifecycle.start()
        except BaseException:
            self.stop()
            raise
        return reconciled

    def _committed(self, candidate: ScheduleCandidate, decision: Decision, result: CommitResult) -> None:
        if result.outcome is CommitOutcome.ADMITTED and self._executor is not None:
            self._executor.poke()
        self._observer.admitted(candidate, decision, result)

    def stop(self) -> StopResult:
        result = StopResult.STOPPED
        if self._lifecycle is not None:
            result = self._lifecycle.stop()
        if self._executor is not None:
            self._executor.stop(self._config.drain_timeout_s)
        if self._db is not None:
            self._db.close()
            self._db = None
        self._lock.release()
        return result
