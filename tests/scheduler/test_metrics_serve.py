"""`ql serve`'s metrics (LocalApp on a real SQLite file, a fake clock, real child processes):
the per-trigger lag, misfires and skips, finished Runs per task and trigger, slots, queue
depth, the cap folding triggers into ``_other``, and the registry published for /metrics."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from qinglong.diagnostics import Diagnostic
from qinglong.domain.task import ArgvCommand, CommandSpec
from qinglong.metrics import OTHER, published
from qinglong.profiles.local import LocalApp, LocalServeConfig
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.testing import FakeClock
from tests.conftest import BASE_MS, SqliteStores

WAIT_S = 20.0
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class Quiet:
    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []

    def admitted(self, *_args: object) -> None:
        pass

    def finished(self, _finished: object) -> None:
        pass

    def reconciled(self, _attempt: object) -> None:
        pass

    def diagnostic(self, diagnostic: Diagnostic) -> None:
        self.diagnostics.append(diagnostic)


def scrape(app: LocalApp) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(generate_latest(app.metrics.registry).decode()):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def wait_for(app: LocalApp, check: Callable[[Samples], bool], what: str) -> Samples:
    deadline = time.monotonic() + WAIT_S
    while True:
        samples = scrape(app)
        if check(samples):
            return samples
        assert time.monotonic() < deadline, f"{what}: {samples}"
        time.sleep(0.05)


def publish_world(stores: SqliteStores, clock: FakeClock, argv: list[str],
                  triggers: dict[str, str]) -> None:
    """Project demo, task hello, and the triggers (name: misfire policy), every second, all
    published at BASE_MS (a whole second, so the first occurrence is BASE_MS)."""
    d = stores.definitions
    clock.set(BASE_MS)
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="hello",
                                     spec=CommandSpec(command=ArgvCommand(file=argv[0],
                                                                      args=tuple(argv[1:])))))
    for trigger, policy in triggers.items():
        d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id=trigger,
                                               task_id="hello", expression="* * * * * *",
                                               timezone="UTC", misfire_policy=policy))


@pytest.fixture
def make_app(sqlite_stores: SqliteStores, clock: FakeClock, tmp_path: Path
             ) -> Iterator[Callable[..., LocalApp]]:
    apps: list[LocalApp] = []

    def build(**options: object) -> LocalApp:
        config = LocalServeConfig(database_path=sqlite_stores.path, log_dir=tmp_path / "logs",
                                  drain_timeout_s=0.5, stop_timeout_s=5.0,
                                  interval_s=0.25, **options)  # type: ignore[arg-type]
        app = LocalApp(config, clock, Quiet())  # type: ignore[arg-type]
        apps.append(app)
        return app

    yield build
    for app in apps:
        app.stop()


def test_serve_counts_lag_runs_and_slots_per_trigger(
        sqlite_stores: SqliteStores, clock: FakeClock, make_app: Callable[..., LocalApp]) -> None:
    publish_world(sqlite_stores, clock, ["/bin/true"], {"every": "fire_once"})
    clock.set(BASE_MS + 1_500)  # BASE_MS is 1.5 s late, BASE_MS + 1 s half a second
    app = make_app(concurrency=2)
    app.start()
    assert app.metrics.registry in published()  # shown by the /metrics of `ql serve --http`
    labels = {"project": "demo", "trigger": "every"}
    samples = wait_for(app, lambda s: value(s, "ql_runs_finished_total", project="demo",
                                            task="hello", trigger="every",
                                            status="succeeded") == 2, "two Runs succeeded")
    lag = "ql_trigger_admission_lag_seconds"
    assert value(samples, f"{lag}_count", **labels) == 2
    assert value(samples, f"{lag}_sum", **labels) == 2.0
    assert value(samples, f"{lag}_bucket", le="0.5", **labels) == 1
    assert value(samples, f"{lag}_bucket", le="2.5", **labels) == 2
    assert value(samples, "ql_trigger_admitted_total", **labels) == 2
    assert value(samples, "ql_admitted_total") == 2
    assert value(samples, "ql_trigger_misfires_total", policy="fire_once", **labels) is None
    assert value(samples, "ql_run_duration_seconds_count", project="demo", task="hello",
                 trigger="every") == 2
    assert value(samples, "ql_worker_slots") == 2
    assert value(samples, "ql_worker_slots_in_use") == 0
    assert (value(samples, "ql_cycles_total") or 0) >= 1
    app.stop()
    assert app.metrics.registry not in published()


def test_serve_counts_misfires_and_skips_by_policy(
        sqlite_stores: SqliteStores, clock: FakeClock, make_app: Callable[..., LocalApp]) -> None:
    publish_world(sqlite_stores, clock, ["/bin/true"], {"dropped": "skip", "once": "fire_once"})
    clock.set(BASE_MS + 120_000)  # two minutes late: beyond the 30 s grace
    app = make_app()
    app.start()
    samples = wait_for(app, lambda s: (
        value(s, "ql_trigger_misfires_total", project="demo", trigger="once",
              policy="fire_once") == 1
        and value(s, "ql_trigger_misfires_total", project="demo", trigger="dropped",
                  policy="skip") == 1), "one misfire each")
    assert value(samples, "ql_trigger_skips_total", project="demo", trigger="dropped",
                 reason="misfire") == 1
    assert value(samples, "ql_trigger_skips_total", project="demo", trigger="once",
                 reason="misfire") is None
    # fire_once admitted the late occurrence two minutes late; the on-time ones after it
    # (those within the grace) at most 30 s late
    lag = "ql_trigger_admission_lag_seconds"
    count = value(samples, f"{lag}_count", project="demo", trigger="once")
    assert count is not None and count >= 1
    assert count - (value(samples, f"{lag}_bucket", project="demo", trigger="once",
                          le="30.0") or 0) == 1
    assert value(samples, "ql_advanced_total", disposition="skip") == 1


def test_serve_folds_triggers_beyond_the_cap_into_other(
        sqlite_stores: SqliteStores, clock: FakeClock, make_app: Callable[..., LocalApp]) -> None:
    publish_world(sqlite_stores, clock, ["/bin/true"], {"a": "fire_once", "b": "fire_once"})
    clock.set(BASE_MS + 1_500)
    app = make_app(metrics_trigger_labels=1)
    app.start()
    samples = wait_for(app, lambda s: value(s, "ql_admitted_total") == 4, "four admissions")
    kept = {dict(key[1])["trigger"]: v for key, v in samples.items()
            if key[0] == "ql_trigger_admitted_total"}
    assert OTHER in kept and len(kept) == 2, kept
    assert sorted(kept.values()) == [2, 2]
    assert set(kept) - {OTHER} <= {"a", "b"}
    assert value(samples, "ql_trigger_admission_lag_seconds_count", project=OTHER,
                 trigger=OTHER) == 2
    assert value(samples, "ql_metrics_label_keys", cap="trigger") == 1
    assert value(samples, "ql_metrics_labels_folded_total", cap="trigger") == 2


def test_serve_reports_queue_depth_and_slots_in_use(
        sqlite_stores: SqliteStores, clock: FakeClock, make_app: Callable[..., LocalApp],
        tmp_path: Path) -> None:
    # The command runs until the test lets it end, so the Run queued behind it stays queued:
    # with a command of a few real seconds it could leave the queue before the first sample
    # after the advance, and the queued Runs left, admitted at the frozen clock, would all be
    # of age 0 until the deadline.
    done = tmp_path / "done"
    publish_world(sqlite_stores, clock,
                  ["/bin/sh", "-c", f"while [ ! -e '{done}' ]; do sleep 0.05; done"],
                  {"slow": "fire_once"})
    clock.set(BASE_MS + 1_500)  # two occurrences due, one slot
    app = make_app(concurrency=1)
    app.start()
    wait_for(app, lambda s: value(s, "ql_worker_slots_in_use") == 1, "one command running")
    clock.advance(5_000)  # queue depth is read at most every 5 s (of the injected clock)
    # a sample read before the advance may count the queued Run at age 0: wait for one after
    samples = wait_for(app, lambda s: (value(s, "ql_queue_depth") or 0) >= 1
                       and (value(s, "ql_queue_oldest_age_seconds") or 0) > 0,
                       "a queued Run counted with its age")
    assert (value(samples, "ql_queue_oldest_age_seconds") or 0) > 0
    done.touch()  # the commands end, so the app stops at once
