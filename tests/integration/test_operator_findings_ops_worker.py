"""Issue 18, item 1, on PostgreSQL: a worker under the wrong role used to report ready and drop
every Run's output (`QL_PERMISSION_DENIED: store log output` in its log, `ql run logs`
printing nothing with exit 0).

Now `ql worker` (and `ql control`) audit the exact privileges of the role they must connect
as and refuse to start under another one, naming it (exit 3); and output a worker's log store
refuses is never silent: the worker is not ready (and takes no new work) while it is refused,
the Attempt's ending records how much could not be stored and why, and `ql run logs` prints
that where the output would be and exits 1 -- while an Attempt that printed nothing still
reads as nothing, exit 0."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from qinglong.diagnostics import Diagnostic
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import NotReady
from qinglong.execution.executor import RunFinished
from qinglong.profiles.worker import WorkerApp
from qinglong.profiles.worker_config import load_worker_settings
from qinglong.storage.definitions.params import TaskPublishParams
from qinglong.storage.postgres.readiness import audit
from qinglong.storage.postgres.roles import RUNTIME, WORKER
from tests.integration.conftest import Cluster
from tests.support.ql_process import run_ql

WAIT_S = 40.0
ENV = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}


class Quiet:
    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []

    def finished(self, finished: RunFinished) -> None:
        pass

    def state(self, state: str, reason: str) -> None:
        pass

    def diagnostic(self, diagnostic: Diagnostic) -> None:
        self.diagnostics.append(diagnostic)


def ql(*args: str, url: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_ql([*args, "--database-url", url],
                  timeout=timeout, env=ENV)


def readyz(port: int) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def worker_settings(cluster: Cluster, role: str) -> Any:
    return load_worker_settings({
        "database_url": cluster.db.url(role), "worker_id": "w1", "slots": 2, "lease_ms": 6_000,
        "poll_ms": 200, "http": "127.0.0.1:0", "drain_timeout_ms": 1_000})


@pytest.fixture
def workers() -> Iterator[list[tuple[WorkerApp, threading.Event]]]:
    started: list[tuple[WorkerApp, threading.Event]] = []
    yield started
    for app, stop in started:
        stop.set()
        app.drain()
        app.close()


# -- the role ------------------------------------------------------------------------------


def test_the_audit_holds_a_process_to_the_role_it_must_connect_as(cluster: Cluster) -> None:
    with psycopg.connect(cluster.db.url(RUNTIME), row_factory=dict_row,
                         autocommit=True) as conn:
        as_runtime = audit(conn, expected=WORKER)  # type: ignore[arg-type]
        assert audit(conn, expected=RUNTIME) == []  # type: ignore[arg-type]
    assert "wrong-role:ql_runtime:connect-as:ql_worker" in as_runtime
    # what the worker would lack, and what it would have too much of
    assert "missing-privilege:ql_runtime:run_log_chunks:INSERT" in as_runtime
    assert "extra-privilege:ql_runtime:trigger_schedules:UPDATE" in as_runtime
    with psycopg.connect(cluster.db.url(WORKER), row_factory=dict_row,
                         autocommit=True) as conn:
        assert audit(conn, expected=WORKER) == []  # type: ignore[arg-type]


def test_a_worker_under_the_wrong_role_refuses_to_start_and_names_the_right_one(
        cluster: Cluster, workers: list[tuple[WorkerApp, threading.Event]]) -> None:
    app = WorkerApp(worker_settings(cluster, RUNTIME), Quiet())  # type: ignore[arg-type]
    port = app.start_http()
    stop = threading.Event()
    workers.append((app, stop))
    with pytest.raises(NotReady) as refused:
        app.start(stop)
    assert "wrong-role:ql_runtime:connect-as:ql_worker" in refused.value.findings
    assert refused.value.message.startswith(
        "`ql worker` must connect as ql_worker, not ql_runtime; give it a URL for ql_worker: "
        "its privileges are not ql_worker's (")
    code, body = readyz(port)
    assert code == 503 and "must connect as ql_worker" in body["reason"], body
    assert cluster.count("instances") == 0  # it never registered


def test_ql_worker_and_ql_control_under_the_wrong_role_exit_3(cluster: Cluster) -> None:
    worker = ql("worker", "--worker-id", "w1", "--http", "127.0.0.1:0",
                url=cluster.db.url(RUNTIME))
    assert worker.returncode == 3, worker.stdout + worker.stderr
    assert worker.stderr.splitlines()[-1].startswith(
        "ql: `ql worker` must connect as ql_worker, not ql_runtime; give it a URL for "
        "ql_worker: its privileges are not ql_worker's (")
    control = ql("control", "--owner-id", "c1", "--http", "127.0.0.1:0",
                 url=cluster.db.url(WORKER))
    assert control.returncode == 3, control.stdout + control.stderr
    assert control.stderr.splitlines()[-1].startswith(
        "ql: `ql control` must connect as ql_runtime, not ql_worker")
    assert cluster.count("runs") == 0


# -- output that cannot be stored ----------------------------------------------------------


def test_output_the_worker_cannot_store_is_recorded_and_ql_run_logs_says_so(
        cluster: Cluster, workers: list[tuple[WorkerApp, threading.Event]]) -> None:
    for task, command in (("loud", "echo 'a line nobody will read'; sleep 3"),
                          ("quiet", "true")):
        cluster.admin.task_publish(TaskPublishParams(
            project_id="demo", task_id=task, name=task,
            spec=CommandSpec(command=ShellCommand(command=command))))
    observer = Quiet()
    app = WorkerApp(worker_settings(cluster, WORKER), observer)  # type: ignore[arg-type]
    port = app.start_http()
    stop = threading.Event()
    workers.append((app, stop))
    app.start(stop)
    wait_for(lambda: readyz(port)[0] == 200, "the worker ready")
    runtime = cluster.db.url(RUNTIME)

    def run_now(task: str) -> str:
        done = ql("task", "run", "--project", "demo", "--task", task, "--json", url=runtime)
        assert done.returncode == 0, done.stderr
        return str(json.loads(done.stdout)["id"])

    def status(run_id: str) -> str:
        [row] = cluster.db.execute("SELECT status FROM runs WHERE id = %s", [run_id])
        return str(row["status"])

    # the worker was ready; then its role loses the right to store output
    cluster.db.execute("REVOKE INSERT ON run_log_chunks FROM ql_worker")
    loud = run_now("loud")
    # while its output is refused the worker says so and is not ready
    def refused() -> dict[str, Any] | None:
        code, body = readyz(port)
        return body if code == 503 else None

    body = wait_for(refused, "readyz 503 while output is refused")
    assert body["reason"].startswith("the database refuses command output: "
                                     "QL_PERMISSION_DENIED: store log output"), body
    assert "run_log_chunks" in body["reason"]
    wait_for(lambda: status(loud) == "succeeded", "the loud Run to end")
    assert cluster.count("run_log_chunks") == 0
    [ending] = cluster.db.execute(
        "SELECT payload FROM run_events WHERE run_id = %s AND type = 'attempt.succeeded'",
        [loud])
    payload = ending["payload"]
    assert isinstance(payload, dict)
    assert payload["output_lost_bytes"] == len("a line nobody will read\n")
    assert str(payload["output_lost"]).startswith("QL_PERMISSION_DENIED: store log output")
    assert any(d.code == "QL_LOG_NOT_STORED" for d in observer.diagnostics)

    logs = ql("run", "logs", loud, url=runtime)
    assert logs.returncode == 1, logs.stdout + logs.stderr
    assert logs.stdout.startswith(
        f"\n[qinglong: {len('a line nobody will read') + 1} bytes of this attempt's output "
        "could not be stored by its worker (QL_PERMISSION_DENIED: store log output"), logs.stdout
    assert logs.stderr.splitlines() == [
        (f"ql: run {loud}: output its worker could not store is missing from this log "
         f"({payload['output_lost']})")]

    shown = ql("run", "show", loud, "--json", url=runtime)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["log_tail"][-1].startswith(
        "[qinglong: 24 bytes of this attempt's output could not be stored by its worker")

    # storing works again: the worker is ready again, and an attempt that printed nothing
    # reads as nothing, exit 0 -- distinguishable from one whose output was lost
    cluster.db.execute("GRANT INSERT ON run_log_chunks TO ql_worker")
    wait_for(lambda: readyz(port)[0] == 200, "the worker ready again")
    quiet = run_now("quiet")
    wait_for(lambda: status(quiet) == "succeeded", "the quiet Run to end")
    nothing = ql("run", "logs", quiet, url=runtime)
    assert (nothing.returncode, nothing.stdout, nothing.stderr) == (0, "", "")
