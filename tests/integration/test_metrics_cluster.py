"""Metrics of a `ql control` replica and a `ql worker`, in-process, on real PostgreSQL: the
per-trigger admission lag under its project and trigger, queue depth read by the database
clock, finished Runs per task and trigger with their duration, slots, and the cap."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from qinglong.diagnostics import Diagnostic
from qinglong.metrics import OTHER
from qinglong.profiles.cluster import Availability, ClusterControl
from qinglong.profiles.cluster_config import load_control_settings
from qinglong.profiles.worker import WorkerApp
from qinglong.profiles.worker_config import load_worker_settings
from tests.integration.conftest import Cluster

WAIT_S = 30.0
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class Quiet:
    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []

    def state(self, state: Availability | str, reason: str) -> None:
        pass

    def diagnostic(self, diagnostic: Diagnostic) -> None:
        self.diagnostics.append(diagnostic)

    def committed(self, *_args: object) -> None:
        pass

    def rescued(self, *_args: object) -> None:
        pass

    def finished(self, *_args: object) -> None:
        pass


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def wait_for(port: int, check: Callable[[Samples], bool], what: str) -> Samples:
    deadline = time.monotonic() + WAIT_S
    while True:
        samples = scrape(port)
        if check(samples):
            return samples
        assert time.monotonic() < deadline, f"{what}: {sorted(samples)[:80]}"
        time.sleep(0.1)


@pytest.fixture
def stoppers() -> Iterator[list[Callable[[], Any]]]:
    found: list[Callable[[], Any]] = []
    yield found
    for stop in reversed(found):
        stop()


def start_control(cluster: Cluster, stoppers: list[Callable[[], Any]]) -> int:
    settings = load_control_settings({
        "database_url": cluster.db.url("ql_runtime"), "owner_id": "m1", "lease_ms": 3_000,
        "grace_ms": 30_000, "interval_ms": 250, "http": "127.0.0.1:0", "reactivate_ms": 200})
    app = ClusterControl(settings, Quiet())  # type: ignore[arg-type]
    port = app.start_http()
    stop = threading.Event()
    thread = threading.Thread(target=app.run, args=(stop,), daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join(WAIT_S)

    stoppers.append(halt)
    return port


def test_control_and_worker_metrics_carry_the_trigger(
        cluster: Cluster, stoppers: list[Callable[[], Any]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QL_METRICS_TRIGGER_LABELS", "1")  # t1 keeps its labels, t2 is _other
    cluster.publish("t1")
    control = start_control(cluster, stoppers)
    t1 = {"project": "demo", "trigger": "t1"}
    samples = wait_for(control, lambda s: (value(
        s, "ql_trigger_admission_lag_seconds_count", **t1) or 0) >= 2, "t1 admitted twice")
    assert value(samples, "ql_trigger_admission_lag_seconds_bucket", le="+Inf", **t1) == \
        value(samples, "ql_trigger_admission_lag_seconds_count", **t1)
    assert (value(samples, "ql_trigger_admitted_total", **t1) or 0) >= 2
    assert (value(samples, "ql_admitted_total") or 0) >= 2
    assert value(samples, "ql_ready") == 1
    # no worker yet: the admitted Runs wait in the queue
    samples = wait_for(control, lambda s: (value(s, "ql_queue_depth") or 0) >= 1,
                       "queued Runs counted")
    assert value(samples, "ql_queue_oldest_age_seconds") is not None
    cluster.publish("t2")  # beyond the cap of one trigger: counted under _other
    samples = wait_for(control, lambda s: (value(
        s, "ql_trigger_admitted_total", project=OTHER, trigger=OTHER) or 0) >= 1,
        "t2 under _other")
    assert value(samples, "ql_trigger_admitted_total", project="demo", trigger="t2") is None
    assert value(samples, "ql_metrics_label_keys", cap="trigger") == 1

    monkeypatch.setenv("QL_METRICS_TRIGGER_LABELS", "50")  # the worker's own cap
    worker_settings = load_worker_settings({
        "database_url": cluster.db.url("ql_worker"), "worker_id": "w1", "slots": 2,
        "lease_ms": 6_000, "poll_ms": 200, "http": "127.0.0.1:0", "drain_timeout_ms": 1_000})
    worker = WorkerApp(worker_settings, Quiet())  # type: ignore[arg-type]
    port = worker.start_http()
    stop = threading.Event()
    worker.start(stop)

    def halt_worker() -> None:
        stop.set()
        worker.drain()
        worker.close()

    stoppers.append(halt_worker)
    run = {"project": "demo", "task": "hello", "trigger": "t1"}
    samples = wait_for(port, lambda s: (value(
        s, "ql_runs_finished_total", status="succeeded", **run) or 0) >= 1, "a t1 Run done")
    assert (value(samples, "ql_run_duration_seconds_count", **run) or 0) >= 1
    assert (value(samples, "ql_worker_runs_total", status="succeeded") or 0) >= 1  # as before
    assert value(samples, "ql_worker_slots") == 2
    assert value(samples, "ql_worker_ready") == 1
    assert value(samples, "ql_metrics_label_limit", cap="run") == 50
