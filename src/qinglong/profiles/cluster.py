"""The cluster profile: one `ql control` replica.

Start: HTTP probes (livez 200, readyz 503) -> activation: pool -> readiness audit (exactly
the ql_runtime privileges; connecting as another role refuses the start, exit 3) ->
startup recovery gate -> registration of the owner id (one live process per id, see
profiles/registration.py; an id a live process holds refuses the start, exit 4) ->
scheduler lifecycle and heartbeat -> readyz 200. Stop: readyz 503 -> stop and drain the
scheduler -> close the pool -> HTTP. Losing the database (connection lost, backend
terminated, server read-only) trips the availability fence: readyz 503, no admissions,
livez stays 200, until a fresh activation succeeds (registering again as the same process).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg

from qinglong.api.health import HttpServer, create_app
from qinglong.clock import Clock, SystemClock
from qinglong.diagnostics import Diagnostic, diagnostic_from
from qinglong.domain.decision import Decision
from qinglong.domain.schedule import ScheduleClaim
from qinglong.errors import (
    ConnectionLost,
    InstanceHeld,
    NotReady,
    QinglongError,
    ServerNotWritable,
)
from qinglong.execution.reconciler import Reconciler, ReconcileReport
from qinglong.loops import PacedLoop, StopResult
from qinglong.notify.wiring import NotifyService
from qinglong.profiles.availability import Availability, AvailabilityFence
from qinglong.profiles.cluster_config import ControlSettings
from qinglong.profiles.control_parts import (
    ControlObserver,
    ControlSeams,
    Metrics,
    cluster_notify_service,
)
from qinglong.profiles.registration import Heartbeat, register, waiting_reason
from qinglong.profiles.run_notifier import Notifier
from qinglong.scheduler.coordinator import Coordinator
from qinglong.scheduler.report import CycleReport
from qinglong.service.queue import read_queue
from qinglong.storage.admission import RequestAdmissions, ScheduleStore
from qinglong.storage.admission.params import CommitOutcome, CommitResult
from qinglong.storage.flows.start import start_occurrence
from qinglong.storage.instances import InstanceStore, Registration
from qinglong.storage.postgres.connection import PoolConnector, SessionSettings
from qinglong.storage.postgres.driver import open_postgres
from qinglong.storage.postgres.errors import translated
from qinglong.storage.postgres.listener import Listener
from qinglong.storage.postgres.readiness import (
    audit,
    corrupt_runs,
    refuses_start,
    session_findings,
    wrong_role_refusal,
)
from qinglong.storage.postgres.roles import RUNTIME
from qinglong.storage.postgres.topology import choose_primary
from qinglong.storage.retention import open_retention
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.flow_store import FlowStore
from qinglong.storage.runs.logs import LogStore
from qinglong.storage.runs.params import RescuedAttempt
from qinglong.storage.wakeups import Wakeups

FENCE_TRIPPING = (ConnectionLost, ServerNotWritable, NotReady)
RECONCILE_INTERVAL_S = 2.0
IDLE_CAP_S = 5.0  # the longest a listening replica sleeps between cycles
PRUNE_BATCH = 200  # Attempts whose output is removed per pass (one pass a minute)


R = TypeVar("R")
__all__ = ["RECONCILE_INTERVAL_S", "Availability", "ClusterControl", "ControlObserver",
           "ControlSeams", "Metrics", "cluster_notify_service"]


@dataclass
class _Activation:
    connector: PoolConnector
    lifecycle: PacedLoop[CycleReport]
    reconciling: PacedLoop[ReconcileReport]
    coordinator: Coordinator
    runs: RunStore
    notifier: Notifier
    listener: Listener
    heartbeat: Heartbeat
    notifying: NotifyService | None = None  # the notification dispatcher


class ClusterControl:
    def __init__(self, settings: ControlSettings, observer: ControlObserver,
                 seams: ControlSeams | None = None, clock: Clock | None = None) -> None:
        self._settings = settings
        self._clock = clock or SystemClock()
        self._observer = observer
        self._fence = AvailabilityFence(observer)
        self._metrics = Metrics(self._clock)
        self._seams = seams or ControlSeams()
        self._activation: _Activation | None = None
        self._last_report: CycleReport | None = None
        self._activations = 0
        self._http: HttpServer | None = None
        self._instances: InstanceStore | None = None
        self._registration: Registration | None = None  # kept across activations
        # the process's one notifier: wake-ups from other processes arrive through the
        # activation's LISTEN connection (storage/postgres/listener.py)
        self._wakeups = Wakeups()
        self._unsubscribe: Callable[[], None] = lambda: None

    # -- HTTP -------------------------------------------------------------------------

    def _ready(self) -> tuple[bool, str]:
        state, reason = self._fence.state
        return state is Availability.READY, reason

    def _idle_cap_s(self) -> float | None:
        """The scheduler's longest sleep while wake-ups from other processes are reliable
        (None: poll at the interval). It also bounds the replica's heartbeat gap."""
        return IDLE_CAP_S if self._wakeups.reliable else None

    def _status(self) -> dict[str, Any]:
        state, reason = self._fence.state
        report = self._last_report
        activation = self._activation
        return {
            "stats": activation.coordinator.stats.snapshot() if activation else {},
            "owner": self._settings.owner_id,
            "state": state.value,
            "reason": reason,
            "activations": self._activations,
            "wakeups": None if activation is None else {
                "listening": self._wakeups.reliable,
                "notifications": self._wakeups.received,
            },
            "last_cycle": None if report is None else {
                "claimed": report.claimed, "admitted": report.admitted, "raced": report.raced,
                "skipped": report.skipped, "initialized": report.initialized,
                "errors": report.errors, "saturated": report.saturated,
            },
        }

    def start_http(self) -> int:
        app = create_app(ready=self._ready, status=self._status, registry=self._metrics.registry)
        self._http = HttpServer(app, self._settings.http)
        self._http.start()
        return self._http.port

    # -- activation -------------------------------------------------------------------

    def activate(self, stop: threading.Event | None = None) -> bool:
        """Pool -> readiness -> recovery -> registration -> lifecycle; raises when the replica
        cannot start (or ``stop`` is set while it waits for the database); False when ``stop``
        was set while it waited for its owner id."""
        s = self._settings
        target = choose_primary(s.database_url, application_name=f"ql-control:{s.owner_id}"[:63])
        connector = PoolConnector(
            target,
            application_name=f"ql-control:{s.owner_id}"[:63],
            settings=SessionSettings(
                statement_timeout_ms=s.statement_timeout_ms,
                lock_timeout_ms=1000,
                idle_in_transaction_timeout_ms=s.idle_in_transaction_timeout_ms,
                transaction_timeout_ms=s.transaction_timeout_ms,
            ),
            max_size=s.pool_size,
            on_lost=lambda: self._trip("database connection lost"),
        )
        try:
            connector.open(cancelled=None if stop is None else stop.is_set)
            with connector.connection() as conn, translated("check the database", conn):
                findings = audit(conn, expected=RUNTIME) + session_findings(conn, s.lease_ms)
                if findings:
                    raise wrong_role_refusal(findings, "ql control") or NotReady(findings)
                corrupt = corrupt_runs(conn)
                if corrupt:
                    raise NotReady(corrupt, "runs in an impossible state block activation: "
                                   + ", ".join(corrupt[:4]) + (" and more" if len(corrupt) > 4 else ""))
            db = open_postgres(connector, self._wakeups.publish, index_scans_only=True)
            store = ScheduleStore(db, actor_id=s.owner_id,
                                    commit_deadline_s=s.commit_deadline_ms / 1000,
                                    before_commit=self._seams.before_commit,
                                    on_retry=lambda state: self._metrics.retries.labels(state).inc(),
                                    start_flow=start_occurrence)
            coordinator = Coordinator(
                store, owner=s.owner_id, lease_ms=s.lease_ms, budget=s.budget, batch=s.batch,
                grace_ms=s.grace_ms, on_committed=self._committed, diagnostics=self._diagnostic,
                after_claim=self._seams.after_claim,
            )
            listener = Listener(target, f"ql-listen:{s.owner_id}"[:63], self._wakeups,
                                topics=("schedules",))
            lifecycle = PacedLoop(
                lambda: self._cycle(coordinator, lifecycle.stop_requested), interval_s=s.interval_ms / 1000,
                stop_timeout_s=s.stop_timeout_ms / 1000, diagnostics=self._diagnostic,
                on_report=self._report, idle_cap_s=self._idle_cap_s,
            )
            self._unsubscribe = self._wakeups.subscribe("schedules",
                                                        lambda _payload: lifecycle.wake())
            runs = RunStore(db, actor_id=s.owner_id)
            notifier = Notifier(connector)
            logs = LogStore(db)
            retention_ms = s.log_retention_days * 86_400_000
            history = open_retention(db, self._clock, days=s.retention_days)

            def prune() -> int:
                return logs.log_prune(retention_ms, PRUNE_BATCH) + history()

            reconciler = Reconciler(runs, on_rescued=self._rescued,
                                    on_promoted=lambda _runs: notifier.poke(), prune=prune,
                                    expire_flows=FlowStore(db, RequestAdmissions(db),
                                                           actor_id=s.owner_id).flows_expire)
            reconciling = PacedLoop(
                lambda: self._reconcile(reconciler), interval_s=RECONCILE_INTERVAL_S,
                stop_timeout_s=s.stop_timeout_ms / 1000, diagnostics=self._diagnostic,
                name="ql-reconciler",
            )
            notifying = cluster_notify_service(target, self._clock, owner=s.owner_id,
                                        stop_timeout_s=s.stop_timeout_ms / 1000,
                                        diagnostics=self._diagnostic)
            instances = InstanceStore(db,
                                        commit_deadline_s=s.commit_deadline_ms / 1000)
            registration = register(
                instances, s.owner_id, "control", stop=stop or threading.Event(),
                resume=self._registration,
                waiting=lambda held: self._fence.not_ready(waiting_reason(held)))
            if registration is None:  # stopped while it waited
                connector.close()
                return False
            self._registration = registration
            self._instances = instances
            heartbeat = Heartbeat(instances, s.owner_id,
                                  on_error=lambda exc: self._diagnostic(
                                      diagnostic_from("control", exc)),
                                  on_lost=self._registration_lost)
        except BaseException:
            connector.close()
            raise
        self._activation = _Activation(connector=connector, lifecycle=lifecycle,
                                       reconciling=reconciling, coordinator=coordinator,
                                       runs=runs,
                                       notifier=notifier, listener=listener, heartbeat=heartbeat,
                                       notifying=notifying)
        self._activations += 1
        self._metrics.activations.inc()
        self._fence.activated()
        self._metrics.ready.set(1)
        notifier.start()
        listener.start()
        lifecycle.start()
        reconciling.start()
        notifying.start()
        heartbeat.start()
        return True

    def _registration_lost(self) -> None:
        """A heartbeat found the owner id registered to another process (this one was silent
        past the staleness window): stop admitting; the next activation registers again and
        refuses the start if that process is alive."""
        self._diagnostic(Diagnostic(
            source="control", code=InstanceHeld.code,
            message=f"owner id {self._settings.owner_id!r} is no longer registered to this "
                    "process: another process took it over"))
        self._trip("owner id taken over by another process")

    def _cycle(self, coordinator: Coordinator, stop_requested: Callable[[], bool]) -> CycleReport:
        if not self._fence.ready:
            return CycleReport()  # unavailable: no claims, no admissions
        return self._guarded(lambda: coordinator.run_cycle(stop_requested))

    def _reconcile(self, reconciler: Reconciler) -> ReconcileReport:
        if not self._fence.ready:
            return ReconcileReport(rescued=0, promoted=0, saturated=False)
        report = self._guarded(reconciler.run_cycle)
        activation = self._activation
        if activation is not None:
            # the queue gauge is a hint: a failed reading keeps the last one (the reconciler's
            # own statements report a lost database)
            with contextlib.suppress(QinglongError, psycopg.Error):
                self._metrics.queue.refresh(lambda: read_queue(activation.runs))
        return report

    def _guarded(self, cycle: Callable[[], R]) -> R:
        try:
            return cycle()
        except FENCE_TRIPPING as exc:
            self._trip(exc.message)
            raise

    def _rescued(self, attempt: RescuedAttempt) -> None:
        self._metrics.rescue.observe(attempt)
        if attempt.outcome == "requeued" and self._activation is not None:
            self._activation.notifier.poke()
        self._observer.rescued(attempt)

    def _trip(self, reason: str) -> None:
        self._metrics.ready.set(0)
        self._fence.trip(reason)

    def deactivate(self) -> StopResult:
        activation, self._activation = self._activation, None
        if activation is None:
            return StopResult.STOPPED
        result = activation.lifecycle.stop()
        activation.heartbeat.stop()
        activation.listener.stop()
        self._unsubscribe()
        activation.reconciling.stop()
        activation.notifier.stop()
        if activation.notifying is not None:
            activation.notifying.stop()
        instances, self._instances = self._instances, None
        if instances is not None and self._fence.state[0] is Availability.STOPPING:
            try:
                instances.instance_stop(self._settings.owner_id)
            except QinglongError as exc:
                self._diagnostic(diagnostic_from("control", exc))
        activation.connector.close()
        return result

    # -- supervision ------------------------------------------------------------------

    def run(self, stop: threading.Event) -> StopResult:
        """Activate, and re-activate after losing the database, until ``stop`` is set."""
        last_failure = None
        while not stop.is_set():
            try:
                if not self.activate(stop):
                    break
            except QinglongError as exc:
                if refuses_start(exc):  # another process holds the owner id, or the wrong role
                    self._diagnostic(diagnostic_from("control", exc))
                    self.shutdown()
                    raise
                if stop.is_set():
                    break
                self._fence.not_ready(exc.message)
                if exc.message != last_failure:  # report a persistent failure once
                    self._diagnostic(diagnostic_from("control", exc))
                last_failure = exc.message
                stop.wait(self._settings.reactivate_ms / 1000)
                continue
            last_failure = None
            while not stop.is_set() and not self._fence.wait_tripped(0.2):
                pass
            if stop.is_set():
                break
            self.deactivate()  # the fence tripped: drop this activation, then start afresh
            stop.wait(self._settings.reactivate_ms / 1000)
        return self.shutdown()

    def shutdown(self) -> StopResult:
        self._fence.stopping()  # readyz 503 first
        self._metrics.ready.set(0)
        result = self.deactivate()
        if self._http is not None:
            self._http.stop()
        return result

    # -- observation ------------------------------------------------------------------

    def _committed(self, claim: ScheduleClaim, decision: Decision, result: CommitResult) -> None:
        # decision.observed_at_ms is the claim's database time (fence.acquired_at_ms)
        self._metrics.scheduler.committed(claim.candidate.project_id, claim.candidate.trigger_id,
                                          decision, result)
        if result.outcome is CommitOutcome.ADMITTED and self._activation is not None:
            self._activation.notifier.poke()
        if self._seams.on_committed is not None:
            self._seams.on_committed(claim, decision, result)
        self._observer.committed(claim, decision, result)

    def _report(self, report: CycleReport) -> None:
        self._last_report = report
        self._metrics.cycles.inc()

    def _diagnostic(self, diagnostic: Diagnostic) -> None:
        self._metrics.errors.labels(diagnostic.code).inc()
        self._observer.diagnostic(diagnostic)
