"""The worker profile: one `ql worker` runs admitted cluster Runs under fenced leases.

Start: HTTP probes (livez 200, readyz 503) -> pool -> readiness audit for the worker role
(exactly the ql_worker privileges, session timeouts below the lease; connecting as another
role refuses the start, exit 3) -> registration of the worker id (one live process per id,
see profiles/registration.py; an id a live process holds refuses the start, exit 4) ->
executor, heartbeat and the notification listener -> readyz 200. While the log store refuses
output, readyz is 503 and no new work is taken (execution/logship.py); what could not be
stored is recorded on the Attempt. Stop (SIGTERM): readyz 503, stop taking work, keep
renewing while running commands finish for the drain timeout, then stop the rest and queue
their Runs again without spending an attempt; a second SIGTERM is a hard stop (commands are
killed, nothing more is written, the reconciler settles their Runs).

Liveness and run time are judged apart: the lease (renewed for all running commands in one
statement) proves the worker is alive, whatever the commands' own timeouts are.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import Counter, Gauge, ProcessCollector

from qinglong.api.health import HttpServer, create_app
from qinglong.clock import Clock, SystemClock
from qinglong.diagnostics import Diagnostic, diagnostic_from
from qinglong.errors import AlreadyRunning, NotReady, QinglongError
from qinglong.execution.executor import Executor, RunFinished
from qinglong.ids import new_uuid
from qinglong.metrics import Caps, ExecutionMetrics, new_registry
from qinglong.profiles.lease_recording import LeaseRecordingRunStore
from qinglong.profiles.registration import Heartbeat, register, waiting_reason
from qinglong.profiles.worker_config import WorkerSettings
from qinglong.storage.deps import DepStore
from qinglong.storage.instances import InstanceStore, Registration
from qinglong.storage.postgres.connection import (
    PoolConnector,
    SessionSettings,
    SingleConnector,
)
from qinglong.storage.postgres.driver import open_postgres
from qinglong.storage.postgres.errors import translated
from qinglong.storage.postgres.listener import Listener
from qinglong.storage.postgres.readiness import (
    audit,
    refuses_start,
    session_findings,
    wrong_role_refusal,
)
from qinglong.storage.postgres.roles import WORKER
from qinglong.storage.postgres.topology import choose_primary
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.logs import LogStore
from qinglong.storage.scripts import ScriptStore
from qinglong.storage.wakeups import Wakeups


class WorkerObserver(Protocol):
    def finished(self, finished: RunFinished) -> None: ...
    def state(self, state: str, reason: str) -> None: ...
    def diagnostic(self, diagnostic: Diagnostic) -> None: ...


class WorkerMetrics:
    """The worker's registry: the execution families shared with `ql serve`
    (qinglong.metrics: Runs by outcome per task and trigger, durations, slots) and the
    worker's own, whose names predate them."""

    def __init__(self, label_limit: int | None = None) -> None:
        self.registry = new_registry()
        ProcessCollector(registry=self.registry)
        self.caps = Caps(self.registry, label_limit)
        self.execution = ExecutionMetrics(self.registry, self.caps.runs)
        self.slots = self.execution.slots
        self.capacity = self.execution.capacity
        self.runs = Counter("ql_worker_runs_total", "Runs this worker finished, by outcome",
                            ["status"], registry=self.registry)
        self.ready = Gauge("ql_worker_ready", "1 while this worker takes work",
                           registry=self.registry)
        self.errors = Counter("ql_worker_errors_total", "Errors, by code", ["code"],
                              registry=self.registry)
        self.duration = Counter("ql_worker_run_seconds_total", "Time spent running commands",
                                registry=self.registry)


def _cancel(executor: Executor, run_id: str) -> None:
    """A Run asked to stop: its command is stopped if it runs here (none is named after a
    reconnect: the next renewal tells which)."""
    if run_id:
        executor.cancel(run_id)


class WorkerApp:
    def __init__(self, settings: WorkerSettings, observer: WorkerObserver,
                 clock: Clock | None = None) -> None:
        self._settings = settings
        self._identity = settings.identity()  # refuses a --run-as it cannot use, before anything
        self.limits_support = self._identity.limits_support()  # what this host applies
        self._observer = observer
        self._clock = clock or SystemClock()
        self.metrics = WorkerMetrics()
        self.metrics.capacity.set(settings.slots)
        self.session = f"{settings.worker_id}:{new_uuid()[:8]}"  # never reused across starts
        self._state = ("starting", "starting")
        self._http: HttpServer | None = None
        self._connector: PoolConnector | None = None
        self._lease_connector: SingleConnector | None = None
        self._executor: Executor | None = None
        self._listener: Listener | None = None
        self._wakeups = Wakeups()  # the process's one notifier (storage/wakeups.py)
        self._instances: InstanceStore | None = None
        self._registration: Registration | None = None
        self._heartbeat: Heartbeat | None = None
        self._stop: threading.Event | None = None
        self._spool: tempfile.TemporaryDirectory[str] | None = None
        # why the worker gave up (its id taken over by a live process): `ql worker` exits with it
        self.failure: QinglongError | None = None

    # -- HTTP -------------------------------------------------------------------------

    def _ready(self) -> tuple[bool, str]:
        state, reason = self._state
        executor = self._executor
        if state == "ready" and executor is not None and executor.log_refusals.active:
            return False, f"the database refuses command output: {executor.log_refusals.reason}"
        if state == "ready" and executor is not None and not executor.healthy:
            return False, "the database refuses renewals or acquisitions"
        return state == "ready", reason

    def _status(self) -> dict[str, Any]:
        executor = self._executor
        return {"worker": self._settings.worker_id, "session": self.session,
                "state": self._state[0], "reason": self._state[1],
                "slots": self._settings.slots,
                "labels": self._settings.label_map,
                "nice": self._identity.nice,
                "run_as": None if self._identity.run_as is None else self._identity.run_as.name,
                "limits": self.limits_support,
                "running": executor.active() if executor else 0,
                "started": executor.started if executor else 0,
                "notifications": self._wakeups.received}

    def start_http(self) -> int:
        app = create_app(ready=self._ready, status=self._status, registry=self.metrics.registry)
        self._http = HttpServer(app, self._settings.http)
        self._http.start()
        return self._http.port

    def _set_state(self, state: str, reason: str) -> None:
        self._state = (state, reason)
        self.metrics.ready.set(1 if state == "ready" else 0)
        self._observer.state(state, reason)

    # -- start and stop ---------------------------------------------------------------

    def start(self, stop: threading.Event) -> None:
        """Connect, check readiness and start taking work; retries until ``stop`` is set.
        Raises what waiting does not mend: the wrong role (NotReady, exit 3), an id a live
        process holds (InstanceHeld, exit 4)."""
        s = self._settings
        name = f"ql-worker:{s.worker_id}"[:63]
        self._stop = stop
        while not stop.is_set():
            try:
                self._activate(name, stop)
                return
            except QinglongError as exc:
                if refuses_start(exc):
                    self._set_state("unavailable", exc.message)
                    raise
                self._set_state("unavailable", exc.message)
                self._diagnostic(diagnostic_from("worker", exc))
                stop.wait(2.0)

    def _activate(self, name: str, stop: threading.Event) -> None:
        s = self._settings
        target = choose_primary(s.database_url, application_name=name)
        session = SessionSettings(statement_timeout_ms=s.statement_timeout_ms,
                                  lock_timeout_ms=1000,
                                  idle_in_transaction_timeout_ms=s.idle_in_transaction_timeout_ms,
                                  transaction_timeout_ms=s.lease_ms * 2 // 3)
        connector = PoolConnector(
            target, application_name=name, max_size=s.connections,
            # no store call waits for a connection longer than the self-fence margin
            timeout_s=min(5.0, s.lease_ms / 5000), settings=session)
        # Lease renewals on a connection of their own, opened again at each try once it breaks:
        # after an outage they resume as soon as the database answers, where the pool's next
        # connection attempt may be seconds away (its back-off doubles: 1, 2, 4, 8 s...).
        leases = SingleConnector(target, application_name=f"{name}:leases"[:63],
                                 settings=session)
        try:
            connector.open(cancelled=stop.is_set)
            with connector.connection() as conn, translated("check the database", conn):
                findings = audit(conn, expected=WORKER) + session_findings(conn, s.lease_ms)
                if findings:
                    raise wrong_role_refusal(findings, "ql worker") or NotReady(findings)
            db = open_postgres(connector, index_scans_only=True)
            instances = InstanceStore(db)
            registration = register(
                instances, s.worker_id, "worker", stop=stop,
                waiting=lambda held: self._set_state("unavailable", waiting_reason(held)),
                labels=s.label_map)
            if registration is None:  # stopped while it waited
                connector.close()
                return
            self._instances = instances
            self._registration = registration
        except BaseException:
            connector.close()
            raise
        self._connector = connector
        self._lease_connector = leases
        if s.log_dir is None:
            self._spool = tempfile.TemporaryDirectory(prefix="ql-worker-")
        spool = Path(s.log_dir or (self._spool.name if self._spool else "."))
        executor = Executor(
            LeaseRecordingRunStore(db, actor_id=self.session,
                                   targets=self.metrics.execution.targets),
            self._clock, owner=self.session,
            log_dir=spool, concurrency=s.slots, lease_ms=s.lease_ms,
            log_max_bytes=s.log_max_bytes, poll_interval_s=s.poll_ms / 1000,
            diagnostics=self._diagnostic, on_finished=self._finished, requeue_on_drain=True,
            log_store=LogStore(db),
            lease_store=RunStore(open_postgres(leases, index_scans_only=True),
                                 actor_id=self.session),
            labels=s.label_map,
            identity=self._identity,
            scripts=ScriptStore(db).content,
            repos_url=s.repos_url,
            deps=DepStore(db).recent, deps_dir=s.effective_deps_dir,
        )
        self._executor = executor
        self.metrics.execution.watch_slots(executor.active)
        self._wakeups.subscribe("runs", lambda _payload: executor.poke())
        self._wakeups.subscribe("cancel", lambda run_id: _cancel(executor, run_id))
        self._listener = Listener(target, f"{name}:listen"[:63], self._wakeups,
                                  topics=("runs", "cancel"))
        executor.start()
        self._listener.start()
        self._heartbeat = Heartbeat(
            instances, s.worker_id,
            on_error=lambda exc: self._diagnostic(diagnostic_from("worker", exc)),
            on_lost=self._registration_lost)
        self._heartbeat.start()
        self._set_state("ready", "taking work")

    def _registration_lost(self) -> None:
        """A heartbeat found the worker id no longer registered to this process. Registered
        again as itself when nobody else holds it (a failover lost the row); when another live
        process took it over, this worker stops (drains) and `ql worker` exits 4."""
        instances, registration = self._instances, self._registration
        if instances is None or registration is None:
            return
        s = self._settings
        try:
            instances.instance_start(s.worker_id, "worker", registration.host, registration.pid,
                                     resume=registration, labels=s.label_map)
        except AlreadyRunning as exc:
            self.failure = exc
            self._diagnostic(diagnostic_from("worker", exc))
            self._set_state("unavailable", exc.message)
            if self._stop is not None:
                self._stop.set()  # drain, then exit 4
            return
        except QinglongError as exc:
            self._diagnostic(diagnostic_from("worker", exc))
        heartbeat = Heartbeat(
            instances, s.worker_id,
            on_error=lambda exc: self._diagnostic(diagnostic_from("worker", exc)),
            on_lost=self._registration_lost)
        self._heartbeat = heartbeat
        heartbeat.start()

    def drain(self) -> int:
        """Stop taking work, let commands finish for the drain timeout, then interrupt the rest
        (their Runs are queued again). Returns how many were interrupted."""
        self._set_state("stopping", "draining")
        executor = self._executor
        if executor is None:
            return 0
        return executor.stop(self._settings.drain_timeout_ms / 1000)

    def hard_stop(self) -> int:
        """Kill every command now; nothing more is written."""
        executor = self._executor
        return executor.kill_all() if executor is not None else 0

    def close(self) -> None:
        if self._listener is not None:
            self._listener.stop()
        if self._heartbeat is not None:
            self._heartbeat.stop()
        if self._instances is not None:
            with contextlib.suppress(QinglongError):
                self._instances.instance_stop(self._settings.worker_id)
        if self._connector is not None:
            self._connector.close()
        if self._lease_connector is not None:
            self._lease_connector.close()
        if self._http is not None:
            self._http.stop()
        if self._spool is not None:
            self._spool.cleanup()

    # -- observation ------------------------------------------------------------------

    def _finished(self, finished: RunFinished) -> None:
        self.metrics.runs.labels(finished.status).inc()
        self.metrics.duration.inc(finished.duration_ms / 1000)
        self.metrics.execution.observe(finished.run_id, finished.trigger_id, finished.status,
                                       finished.duration_ms)
        self._observer.finished(finished)

    def _diagnostic(self, diagnostic: Diagnostic) -> None:
        self.metrics.errors.labels(diagnostic.code).inc()
        self._observer.diagnostic(diagnostic)
