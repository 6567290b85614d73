"""What a `ql control` replica is made of besides its lifecycle (profiles/cluster.py): the
observer it reports to, its metrics, the seams a test harness may wire in, and its
notification dispatcher on a connection of its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import Counter, Gauge, ProcessCollector

from qinglong.clock import Clock, SystemClock
from qinglong.diagnostics import Diagnostic, DiagnosticSink
from qinglong.domain.decision import Decision
from qinglong.domain.schedule import ScheduleClaim
from qinglong.metrics import (
    Caps,
    QueueMetrics,
    RescueMetrics,
    SchedulerMetrics,
    new_registry,
)
from qinglong.notify.wiring import NotifyService, notify_service
from qinglong.profiles.availability import Availability
from qinglong.storage.admission.params import CommitResult
from qinglong.storage.notify import NotifyStore
from qinglong.storage.postgres.connection import SessionSettings, SingleConnector
from qinglong.storage.postgres.driver import open_postgres
from qinglong.storage.runs.params import RescuedAttempt


class ControlObserver(Protocol):
    def committed(self, claim: ScheduleClaim, decision: Decision, result: CommitResult) -> None: ...
    def state(self, state: Availability, reason: str) -> None: ...
    def diagnostic(self, diagnostic: Diagnostic) -> None: ...
    def rescued(self, attempt: RescuedAttempt) -> None: ...


class Metrics:
    """The replica's registry: the scheduler families shared with `ql serve`
    (qinglong.metrics), lease takeovers, queue depth, and the replica's own."""

    def __init__(self, clock: Clock | None = None, label_limit: int | None = None) -> None:
        self.registry = new_registry()
        ProcessCollector(registry=self.registry)
        self.caps = Caps(self.registry, label_limit)
        self.scheduler = SchedulerMetrics(self.registry, self.caps.triggers)
        self.admitted = self.scheduler.admitted
        self.advanced = self.scheduler.advanced
        self.raced = self.scheduler.raced
        self.cycles = self.scheduler.cycles
        self.errors = self.scheduler.errors
        self.lag = self.scheduler.lag
        self.retries = Counter("ql_admission_retries_total",
                               "Admission attempts retried before COMMIT (serialization, deadlock, lock timeout)",
                               ["sqlstate"], registry=self.registry)
        self.activations = Counter("ql_activations_total", "Successful activations",
                                   registry=self.registry)
        self.ready = Gauge("ql_ready", "1 while this replica admits", registry=self.registry)
        self.rescue = RescueMetrics(self.registry)
        self.rescued = self.rescue.rescued
        self.queue = QueueMetrics(self.registry, (clock or SystemClock()).monotonic)


def cluster_notify_service(url: str, clock: Clock, *, owner: str, stop_timeout_s: float,
                           diagnostics: DiagnosticSink | None) -> NotifyService:
    """A replica's dispatcher, on a connection of its own (opened on first use, reopened
    after a failure) so it never takes one from the scheduler's pool."""
    connector = SingleConnector(url, application_name=f"ql-notify:{owner}"[:63],
                                settings=SessionSettings(statement_timeout_ms=5_000,
                                                         lock_timeout_ms=1_000,
                                                         idle_in_transaction_timeout_ms=10_000,
                                                         transaction_timeout_ms=20_000))
    store = NotifyStore(open_postgres(connector, index_scans_only=True))
    return notify_service(store, clock, owner=owner, stop_timeout_s=stop_timeout_s,
                          diagnostics=diagnostics, close=connector.close)


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlSeams:
    """Hooks the program that embeds a replica may wire in; production leaves them empty.

    ``before_commit`` runs inside each admission transaction just before COMMIT,
    ``after_claim`` after each claim statement that returned rows, and ``on_committed``
    after each commit with its result (the fault tests hold transactions open, pause after
    claims and keep a ledger of acknowledged admissions through these)."""

    before_commit: Callable[[], None] | None = None
    after_claim: Callable[[], None] | None = None
    on_committed: Callable[[ScheduleClaim, Decision, CommitResult], None] | None = None
