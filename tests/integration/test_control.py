"""A `ql control` replica in-process: activation order, readiness, drain, losing the
database, the recovery gate, and configuration checked before PostgreSQL is opened."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest

from qinglong.diagnostics import Diagnostic
from qinglong.domain.decision import Decision
from qinglong.domain.schedule import ScheduleClaim
from qinglong.errors import InvalidConfig
from qinglong.profiles.cluster import Availability, ClusterControl, ControlSeams
from qinglong.profiles.cluster_config import load_control_settings
from qinglong.storage.admission.params import CommitResult
from tests.integration.conftest import Cluster

WAIT = 20.0


class Observer:
    def __init__(self) -> None:
        self.states: list[tuple[Availability, str]] = []
        self.diagnostics: list[Diagnostic] = []
        self.results: list[CommitResult] = []

    def state(self, state: Availability, reason: str) -> None:
        self.states.append((state, reason))

    def diagnostic(self, diagnostic: Diagnostic) -> None:
        self.diagnostics.append(diagnostic)

    def committed(self, claim: ScheduleClaim, decision: Decision, result: CommitResult) -> None:
        self.results.append(result)


def http(port: int, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_for(predicate: Any, what: str, timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class Running:
    app: ClusterControl
    observer: Observer
    port: int
    stop: threading.Event
    thread: threading.Thread

    def ready(self) -> bool:
        return http(self.port, "/readyz")[0] == 200

    def status(self) -> dict[str, Any]:
        return http(self.port, "/status")[1]

    def shutdown(self) -> None:
        self.stop.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive()


def start(cluster: Cluster, before_commit: Any = None, run: bool = True, **flags: Any) -> Running:
    settings = load_control_settings({
        "database_url": cluster.db.url("ql_runtime"), "owner_id": "c1", "lease_ms": 3_000,
        "grace_ms": 30_000, "interval_ms": 250, "http": "127.0.0.1:0", "reactivate_ms": 200,
        **flags,
    })
    observer = Observer()
    app = ClusterControl(settings, observer, ControlSeams(before_commit=before_commit))
    port = app.start_http()
    stop = threading.Event()
    thread = threading.Thread(target=app.run, args=(stop,), daemon=True)
    running = Running(app, observer, port, stop, thread)
    if run:
        thread.start()
    return running


def terminate_control_backends(cluster: Cluster) -> int:
    rows = cluster.db.execute(
        "SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity "
        "WHERE datname = current_database() AND application_name LIKE 'ql-control:%%'")
    return len(rows)


def test_probes_before_activation_then_ready_and_admitting(cluster: Cluster, controls: list[Running]) -> None:
    cluster.publish("t1")
    running = start(cluster, run=False)
    controls.append(running)
    assert http(running.port, "/livez") == (200, {"status": "alive"})
    code, body = http(running.port, "/readyz")
    assert code == 503 and body["status"] == "not_ready"
    running.thread.start()
    wait_for(running.ready, "readyz 200")
    wait_for(lambda: cluster.count("runs") >= 2, "admissions")
    states = [s for s, _ in running.observer.states]
    assert states[0] is Availability.READY
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{running.port}/metrics", timeout=5).read().decode()
    assert "ql_admitted_total" in metrics and "ql_ready 1.0" in metrics
    # the replica counts an admission once its commit has returned: the database may show
    # the second Run a moment before the status does
    wait_for(lambda: running.status()["stats"]["admitted"] >= 2, "two admissions counted")
    assert running.status()["stats"]["cycles"] >= 1
    [instance] = cluster.db.execute("SELECT role, stopped_at_ms, seen_at_ms, started_at_ms "
                                    "FROM instances WHERE instance_id = 'c1'")
    assert (instance["role"], instance["stopped_at_ms"]) == ("control", None)
    running.shutdown()
    [instance] = cluster.db.execute("SELECT stopped_at_ms, seen_at_ms FROM instances "
                                    "WHERE instance_id = 'c1'")
    assert instance["stopped_at_ms"] is not None  # a clean stop is recorded (the audit's end)
    assert instance["seen_at_ms"] >= instance["stopped_at_ms"]


def test_stop_withdraws_readiness_first_then_drains_the_cycle(cluster: Cluster, controls: list[Running]) -> None:
    cluster.publish("t1")
    cluster.make_due("t1")
    inside = threading.Event()
    release = threading.Event()

    def hold() -> None:
        inside.set()
        release.wait(WAIT)

    running = start(cluster, before_commit=hold)
    controls.append(running)
    assert inside.wait(WAIT), "no commit reached the hold"
    stopper = threading.Thread(target=running.shutdown)
    stopper.start()
    wait_for(lambda: http(running.port, "/readyz")[0] == 503, "readyz 503 while draining")
    assert cluster.count("runs") == 0  # the in-flight commit has not finished yet
    release.set()
    stopper.join(WAIT)
    assert cluster.count("runs") == 1  # the drained cycle completed its admission
    assert running.observer.states[-1][0] is Availability.STOPPING


def test_losing_the_database_makes_the_replica_unavailable_until_a_fresh_activation(
    cluster: Cluster, controls: list[Running]
) -> None:
    cluster.publish("t1")
    running = start(cluster)
    controls.append(running)
    wait_for(running.ready, "first activation")
    assert terminate_control_backends(cluster) >= 1
    wait_for(lambda: any(s is Availability.UNAVAILABLE for s, _ in running.observer.states),
             "the fence to trip")
    assert http(running.port, "/livez")[0] == 200
    wait_for(lambda: running.status()["activations"] >= 2 and running.ready(), "re-activation")
    before = cluster.count("runs")
    wait_for(lambda: cluster.count("runs") > before, "admissions after re-activation")


def test_a_read_only_database_keeps_the_replica_unavailable(cluster: Cluster, controls: list[Running]) -> None:
    cluster.publish("t1")
    running = start(cluster)
    controls.append(running)
    wait_for(running.ready, "first activation")
    name = cluster.db.name
    cluster.db.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    try:
        terminate_control_backends(cluster)
        wait_for(lambda: "server-not-writable-primary" in json.dumps(running.status()),
                 "readiness to refuse a read-only server")
        assert http(running.port, "/readyz")[0] == 503
        assert http(running.port, "/livez")[0] == 200
        frozen = cluster.count("runs")
        # a whole second of t1's by the database clock falls due while it is unavailable
        due = cluster.db_now() // 1000 * 1000 + 2000
        wait_for(lambda: cluster.db_now() >= due, "an occurrence of t1 to fall due")
        assert cluster.count("runs") == frozen  # no admissions while unavailable
        assert "server-not-writable-primary" in json.dumps(running.status())
    finally:
        cluster.db.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
    wait_for(running.ready, "activation once the server is writable again")


def test_activation_accepts_queued_and_expired_work_and_refuses_only_corrupt_runs(
    cluster: Cluster, controls: list[Running]
) -> None:
    cluster.publish("t1")
    cluster.make_due("t1")
    first = start(cluster)
    controls.append(first)
    wait_for(lambda: cluster.count("runs") >= 1, "an admission")
    first.shutdown()
    second = start(cluster, owner_id="c2")  # pristine queued Runs are normal work
    controls.append(second)
    wait_for(second.ready, "activation with pristine queued Runs")
    second.shutdown()
    run_id = cluster.db.execute("SELECT id FROM runs ORDER BY created_at_ms LIMIT 1")[0]["id"]
    # A worker that died while running this Run: its lease expired long ago. That is normal
    # work for the reconciler, not a reason to refuse activation.
    cluster.db.execute(
        "UPDATE run_attempts SET status = 'running', started_at_ms = 1, worker_id = 'dead', "
        "lease_generation = 1, lease_token_digest = repeat('a', 64), lease_expires_at_ms = 1 "
        "WHERE run_id = %s", [run_id])
    cluster.db.execute("UPDATE runs SET status = 'running' WHERE id = %s", [run_id])
    third = start(cluster, owner_id="c3")
    controls.append(third)
    wait_for(third.ready, "activation with an expired lease")
    wait_for(lambda: cluster.db.execute("SELECT status FROM runs WHERE id = %s",
                                        [run_id])[0]["status"] == "lost",
             "the reconciler to mark the dead worker's Run lost")
    [event] = cluster.db.execute(
        "SELECT actor_type, actor_id, payload FROM run_events WHERE run_id = %s "
        "AND type = 'run.lost'", [run_id])
    assert (event["actor_type"], event["actor_id"]) == ("reconciler", "c3")
    assert event["payload"]["reason"] == "lease_expired"  # type: ignore[index]
    third.shutdown()
    # A Run in a shape no lifecycle step produces (running, with nothing leased) is corrupt.
    cluster.db.execute("UPDATE runs SET status = 'running' WHERE id = %s", [run_id])
    fourth = start(cluster, owner_id="c4")
    controls.append(fourth)
    wait_for(lambda: "run-corrupt" in json.dumps(fourth.status()), "the gate to refuse")
    assert http(fourth.port, "/readyz")[0] == 503
    assert (f"run-corrupt:{run_id}:running:executing-without-a-leased-attempt"
            in json.dumps(fourth.status()))


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        ({"lease_ms": 999}, "lease-ms"),
        ({"lease_ms": 60_001}, "lease-ms"),
        ({"grace_ms": 300_001}, "grace-ms"),
        ({"budget": 0}, "budget"),
        ({"budget": 257}, "budget"),
        ({"interval_ms": 249}, "interval-ms"),
        ({"owner_id": "-bad"}, "owner-id"),
        ({"http": "nonsense"}, "http"),
        ({"database_url": "sqlite:///x.db"}, "database-url"),
    ],
)
def test_configuration_is_refused_before_postgres_is_opened(flags: dict[str, Any], field: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:  # where PostgreSQL would be
        port = listener.getsockname()[1]
        base = {"database_url": f"postgresql://ql_runtime@127.0.0.1:{port}/none",
                "owner_id": "c1"}
        with pytest.raises(InvalidConfig) as refused:
            load_control_settings({**base, **flags})
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing tried to connect
    assert refused.value.field == f"--{field}"  # named as the flag the user types


BASE_FLAGS = {"database_url": "postgresql://ql_runtime@127.0.0.1:1/none", "owner_id": "c1"}


def test_the_default_claim_lease_is_well_inside_the_default_grace() -> None:
    settings = load_control_settings(dict(BASE_FLAGS))
    assert settings.lease_ms * 3 <= settings.grace_ms  # a takeover leaves 2/3 of the grace


@pytest.mark.parametrize("lease_ms, grace_ms", [(30_000, 30_000), (20_000, 10_000),
                                                (1_000, 0)])
def test_a_lease_not_shorter_than_the_grace_is_refused_unless_accepted(
        lease_ms: int, grace_ms: int, monkeypatch: pytest.MonkeyPatch) -> None:
    flags = {**BASE_FLAGS, "lease_ms": lease_ms, "grace_ms": grace_ms}
    with pytest.raises(InvalidConfig) as refused:
        load_control_settings(flags)
    assert refused.value.field == "--lease-ms"
    assert "--allow-lease-over-grace" in refused.value.message
    accepted = load_control_settings({**flags, "allow_lease_over_grace": True})
    assert (accepted.lease_ms, accepted.grace_ms) == (lease_ms, grace_ms)
    monkeypatch.setenv("QL_CONTROL_ALLOW_LEASE_OVER_GRACE", "true")  # or by its variable
    assert load_control_settings(flags).allow_lease_over_grace


def test_unknown_environment_settings_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QL_CONTROL_LEASE", "5000")  # a typo of QL_CONTROL_LEASE_MS
    with pytest.raises(InvalidConfig) as refused:
        load_control_settings({"database_url": "postgresql://x@h/db", "owner_id": "c1"})
    assert refused.value.field == "QL_CONTROL_LEASE"
    monkeypatch.delenv("QL_CONTROL_LEASE")
    monkeypatch.setenv("QL_CONTROL_LEASE_MS", "7000")
    assert load_control_settings({"database_url": "postgresql://x@h/db", "owner_id": "c1"}).lease_ms == 7000


@pytest.mark.parametrize(
    ("idle_ms", "transaction_ms", "expected"),
    [
        (2_500, 4_000, []),
        (10_000, 4_000, ["idle-in-transaction-timeout-not-below-lease"]),
        (2_500, 5_000, ["transaction-timeout-not-below-lease"]),
    ],
)
def test_session_timeouts_must_end_a_frozen_transaction_before_its_lease(
    cluster: Cluster, idle_ms: int, transaction_ms: int, expected: list[str]
) -> None:
    from qinglong.storage.postgres.connection import SessionSettings, connect
    from qinglong.storage.postgres.readiness import session_findings

    conn = connect(cluster.db.url("ql_runtime"), application_name="timeouts", settings=SessionSettings(
        idle_in_transaction_timeout_ms=idle_ms, transaction_timeout_ms=transaction_ms))
    try:
        findings = session_findings(conn, lease_ms=5_000)
    finally:
        conn.close()
    if cluster.db.server.version_num < 170000:  # no transaction_timeout before PostgreSQL 17
        expected = [f for f in expected if not f.startswith("transaction")]
    assert findings == expected


def test_sigterm_is_answered_promptly_while_the_database_is_away(tmp_path: Any) -> None:
    import os
    import signal
    import subprocess
    import sys

    from testkit.postgres import free_port

    nobody = free_port(56000)  # nothing listens there: every connection attempt is refused
    env = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
    with out_path.open("w") as out_file, err_path.open("w") as err_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "qinglong", "control", "--owner-id", "away",
             "--database-url", f"postgresql://ql_runtime@127.0.0.1:{nobody}/ql",
             "--http", "127.0.0.1:0", "--lease-ms", "3000", "--grace-ms", "30000",
             "--reactivate-ms", "200"],
            stdout=out_file, stderr=err_file, text=True, env=env)
    try:
        # activation is waiting for the database, again and again, once it said so (a fixed
        # sleep could signal a process still importing on a loaded machine)
        wait_for(lambda: "QL_CONNECTION_LOST" in err_path.read_text(), "the first refusal")
        time.sleep(1.0)  # a few more attempts at --reactivate-ms 200
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        process.wait(timeout=WAIT)
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    out, err = out_path.read_text(), err_path.read_text()
    assert process.returncode == 0, err
    # a connect or pool timeout (10 s and more) would show here
    assert took < 8.0, f"SIGTERM took {took:.1f} s"
    assert "Traceback" not in err and "error connecting in" not in err, err  # no pool noise
    # said at once, with libpq's reason, and once only although activation kept retrying
    assert err.count("QL_CONNECTION_LOST") == 1 and "Connection refused" in err, err
    assert "unavailable: cannot connect to PostgreSQL" in out, out
