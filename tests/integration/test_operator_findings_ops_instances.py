"""Issue 18, item 3, with real processes on PostgreSQL: a second replica with the same
`--owner-id` used to be accepted, and when it stopped the live one showed `stopped` for good.

Now an id is held by one live process at a time (the README's rule: a start whose id
is registered to a process that has not stopped and beat less than 30 s ago watches it; a
heartbeat refuses the start, exit 4; silence until 30 s after the last heartbeat means the
holder crashed, and the start takes the id over). A refused process never registered, so it
cannot mark the live one stopped."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from qinglong.diagnostics import Diagnostic
from qinglong.domain.decision import Decision
from qinglong.domain.schedule import ScheduleClaim
from qinglong.errors import InstanceHeld
from qinglong.execution.executor import RunFinished
from qinglong.profiles.cluster import Availability, ClusterControl
from qinglong.profiles.cluster_config import load_control_settings
from qinglong.profiles.worker import WorkerApp
from qinglong.profiles.worker_config import load_worker_settings
from qinglong.storage.admission.params import CommitResult
from qinglong.storage.instances import INSTANCE_STALE_MS
from testkit.cluster import Replica
from tests.integration.conftest import Cluster
from tests.support.ql_process import run_ql

WAIT_S = 40.0
ENV = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def readyz(port: int) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def registration(cluster: Cluster, instance_id: str) -> dict[str, object]:
    [row] = cluster.db.execute("SELECT role, host, pid, stopped_at_ms FROM instances "
                               "WHERE instance_id = %s", [instance_id])
    return row


def leave_a_crashed_registration(cluster: Cluster, instance_id: str, silent_ms: int) -> None:
    """What a `ql control` killed with SIGKILL leaves: a registration that never stopped,
    its last heartbeat ``silent_ms`` ago by the database clock."""
    cluster.db.execute(
        "INSERT INTO instances (instance_id, role, host, pid, started_at_ms, seen_at_ms) "
        "SELECT %s, 'control', 'crashed-host', 999999, n - 60000, n - %s FROM "
        "(SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS n) o",
        [instance_id, silent_ms])


class Observer:
    def __init__(self) -> None:
        self.states: list[tuple[Availability, str]] = []
        self.diagnostics: list[Diagnostic] = []

    def state(self, state: Availability, reason: str) -> None:
        self.states.append((state, reason))

    def diagnostic(self, diagnostic: Diagnostic) -> None:
        self.diagnostics.append(diagnostic)

    def committed(self, claim: ScheduleClaim, decision: Decision, result: CommitResult) -> None:
        pass

    def finished(self, finished: RunFinished) -> None:
        pass


class Control:
    """A `ql control` replica in this process, running on a thread."""

    def __init__(self, cluster: Cluster, owner: str) -> None:
        settings = load_control_settings({
            "database_url": cluster.db.url("ql_runtime"), "owner_id": owner,
            "lease_ms": 3_000, "grace_ms": 30_000, "interval_ms": 250,
            "http": "127.0.0.1:0", "reactivate_ms": 200})
        self.observer = Observer()
        self.app = ClusterControl(settings, self.observer)  # type: ignore[arg-type]
        self.port = self.app.start_http()
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.app.run(self.stop)
        except BaseException as exc:  # the test reads it
            self.failure = exc

    def shutdown(self) -> None:
        self.stop.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()


@pytest.fixture
def controls() -> Iterator[list[Control]]:
    started: list[Control] = []
    yield started
    for control in started:
        control.shutdown()


def test_a_second_ql_control_with_the_same_owner_id_exits_4_and_the_first_stays_alive(
        cluster: Cluster, tmp_path: Path) -> None:
    first = Replica("c1", cluster.db.url("ql_runtime"), tmp_path)
    first.start()
    try:
        first.wait_ready()
        assert first.process is not None
        second = run_ql(["control", "--owner-id", "c1", "--database-url",
                         cluster.db.url("ql_runtime"), "--http", "127.0.0.1:0"],
                        timeout=60, env=ENV)
        assert second.returncode == 4, second.stdout + second.stderr
        last = second.stderr.splitlines()[-1]
        assert last.startswith(f"ql: instance id 'c1' is held by a live control process (pid "
                               f"{first.process.pid} on "), last
        assert "choose another id" in last
        assert "waiting for instance id 'c1'" in second.stdout  # it watched before refusing
        # the refused replica never registered: the first is still the live holder
        assert first.readyz() == 200
        row = registration(cluster, "c1")
        assert (row["pid"], row["stopped_at_ms"]) == (first.process.pid, None)
    finally:
        assert first.stop() == 0
    assert registration(cluster, "c1")["stopped_at_ms"] is not None  # its own clean stop


def test_a_restart_after_a_crash_waits_until_the_old_registration_is_stale(
        cluster: Cluster, controls: list[Control]) -> None:
    leave_a_crashed_registration(cluster, "c1", silent_ms=INSTANCE_STALE_MS - 10_000)
    [crashed] = cluster.db.execute("SELECT seen_at_ms FROM instances WHERE instance_id = 'c1'")
    control = Control(cluster, "c1")
    controls.append(control)
    wait_for(lambda: readyz(control.port)[0] == 200, "the id taken over once stale")
    # it said what it waited for (/readyz carried the same reason), then became ready
    states = control.observer.states
    waiting = [i for i, (s, r) in enumerate(states)
               if s is Availability.UNAVAILABLE and r.startswith("waiting for instance id")]
    assert waiting, states
    assert states[waiting[0]][1].startswith(
        "waiting for instance id 'c1': it is registered to pid 999999 on crashed-host, last "
        "heartbeat "), states
    assert states[-1][0] is Availability.READY and waiting[-1] < len(states) - 1
    # taken over no sooner than 30 s after the crashed process's last heartbeat (database time)
    [row] = cluster.db.execute("SELECT host, pid, started_at_ms, stopped_at_ms FROM instances "
                               "WHERE instance_id = 'c1'")
    assert (row["host"], row["pid"], row["stopped_at_ms"]) == (
        socket.gethostname(), os.getpid(), None)
    assert row["started_at_ms"] >= crashed["seen_at_ms"] + INSTANCE_STALE_MS  # type: ignore[operator]
    assert control.failure is None


def test_a_registration_already_stale_is_taken_over_at_once(
        cluster: Cluster, controls: list[Control]) -> None:
    leave_a_crashed_registration(cluster, "c1", silent_ms=INSTANCE_STALE_MS + 1_000)
    control = Control(cluster, "c1")
    controls.append(control)
    wait_for(lambda: readyz(control.port)[0] == 200, "ready")
    assert not [r for _, r in control.observer.states if "waiting" in r]
    assert registration(cluster, "c1")["pid"] == os.getpid()


def test_a_second_worker_with_the_same_id_is_refused_and_the_first_keeps_its_registration(
        cluster: Cluster) -> None:
    def worker() -> WorkerApp:
        settings = load_worker_settings({
            "database_url": cluster.db.url("ql_worker"), "worker_id": "w1", "slots": 1,
            "lease_ms": 6_000, "poll_ms": 200, "http": "127.0.0.1:0",
            "drain_timeout_ms": 1_000})
        return WorkerApp(settings, Observer())  # type: ignore[arg-type]

    first, second = worker(), worker()
    first_port = first.start_http()
    second.start_http()
    stop_first, stop_second = threading.Event(), threading.Event()
    try:
        first.start(stop_first)
        wait_for(lambda: readyz(first_port)[0] == 200, "the first worker ready")
        try:
            with pytest.raises(InstanceHeld) as refused:
                second.start(stop_second)
            assert refused.value.instance_id == "w1" and refused.value.role == "worker"
        finally:
            stop_second.set()
            second.drain()
            second.close()  # a refused worker's stop must not touch the first's registration
        assert registration(cluster, "w1")["stopped_at_ms"] is None
        assert readyz(first_port)[0] == 200
    finally:
        stop_first.set()
        first.drain()
        first.close()
    assert registration(cluster, "w1")["stopped_at_ms"] is not None


class Impostor:
    """Another live process holding an id: its registration, kept beating every second."""

    def __init__(self, cluster: Cluster, instance_id: str) -> None:
        self.cluster = cluster
        self.instance_id = instance_id
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)

    def take_over(self) -> None:
        self.cluster.db.execute(
            "UPDATE instances SET host = 'other-host', pid = 4242, stopped_at_ms = NULL, "
            "started_at_ms = (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint, "
            "seen_at_ms = (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint "
            "WHERE instance_id = %s", [self.instance_id])
        self.thread.start()

    def _beat(self) -> None:
        while not self.stop.wait(1.0):
            self.cluster.db.execute(
                "UPDATE instances SET seen_at_ms = "
                "(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint "
                "WHERE instance_id = %s AND pid = 4242", [self.instance_id])

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(5.0)


def test_a_replica_whose_id_was_taken_over_stops_and_leaves_the_holder_alone(
        cluster: Cluster, controls: list[Control]) -> None:
    control = Control(cluster, "c1")
    controls.append(control)
    wait_for(lambda: readyz(control.port)[0] == 200, "ready")
    impostor = Impostor(cluster, "c1")
    try:
        impostor.take_over()  # as if this replica had been silent past 30 s meanwhile
        wait_for(lambda: not control.thread.is_alive(), "the replica to give up its id")
        assert isinstance(control.failure, InstanceHeld), control.failure
        assert control.failure.pid == 4242
        assert any(d.code == "QL_INSTANCE_HELD" for d in control.observer.diagnostics)
        row = registration(cluster, "c1")
        assert (row["host"], row["pid"], row["stopped_at_ms"]) == ("other-host", 4242, None)
    finally:
        impostor.close()


def test_a_replica_whose_registration_vanished_registers_again_as_itself(
        cluster: Cluster, controls: list[Control]) -> None:
    control = Control(cluster, "c1")
    controls.append(control)
    wait_for(lambda: readyz(control.port)[0] == 200, "ready")
    [before] = cluster.db.execute("SELECT started_at_ms FROM instances WHERE instance_id = 'c1'")
    cluster.db.execute("DELETE FROM instances")  # e.g. lost in a failover to a late standby
    wait_for(lambda: cluster.count("instances") == 1, "the replica registered again")
    wait_for(lambda: readyz(control.port)[0] == 200, "ready again")
    row = registration(cluster, "c1")
    assert (row["pid"], row["stopped_at_ms"]) == (os.getpid(), None)
    [after] = cluster.db.execute("SELECT started_at_ms FROM instances WHERE instance_id = 'c1'")
    assert after == before  # the same process, the same start
    assert control.failure is None


def test_a_worker_whose_id_was_taken_over_drains_and_reports_it(cluster: Cluster) -> None:
    settings = load_worker_settings({
        "database_url": cluster.db.url("ql_worker"), "worker_id": "w1", "slots": 1,
        "lease_ms": 6_000, "poll_ms": 200, "http": "127.0.0.1:0", "drain_timeout_ms": 1_000})
    app = WorkerApp(settings, Observer())  # type: ignore[arg-type]
    port = app.start_http()
    stop = threading.Event()
    impostor = Impostor(cluster, "w1")
    try:
        app.start(stop)
        wait_for(lambda: readyz(port)[0] == 200, "the worker ready")
        impostor.take_over()
        wait_for(stop.is_set, "the worker to stop on losing its id")
        assert isinstance(app.failure, InstanceHeld) and app.failure.pid == 4242
        assert readyz(port)[0] == 503
    finally:
        stop.set()
        app.drain()
        app.close()
        impostor.close()
    row = registration(cluster, "w1")
    assert (row["host"], row["pid"], row["stopped_at_ms"]) == ("other-host", 4242, None)
