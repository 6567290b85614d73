"""qinglong.metrics without a database: the families move as decisions and finished Runs are
observed, the trigger labels are right, and the cardinality cap folds keys into ``_other``."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from qinglong.domain.decision import Decision, Disposition
from qinglong.domain.lifecycle import LeaseFence
from qinglong.errors import InvalidConfig
from qinglong.metrics import (
    NO_TRIGGER,
    OTHER,
    QUEUE_REFRESH_S,
    TRIGGER_LABELS_ENV,
    Caps,
    ExecutionMetrics,
    QueueMetrics,
    QueueSample,
    RequirementSample,
    RescueMetrics,
    SchedulerMetrics,
    new_registry,
    publish,
    published,
    queue_sample,
    render,
    trigger_label_limit,
    withdraw,
)
from qinglong.storage.admission.params import CommitOutcome, CommitResult
from qinglong.storage.runs.params import AttemptLease, RescuedAttempt
from qinglong.testing import FakeClock

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(text: bytes) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def admitted(scheduled_ms: int, observed_ms: int, *, misfired: bool = False,
             jittered_ms: int | None = None) -> Decision:
    return Decision(disposition=Disposition.ADMIT, observed_at_ms=observed_ms,
                    due_at_ms=scheduled_ms, next_fire_at_ms=scheduled_ms + 60_000,
                    scheduled_for_ms=scheduled_ms, misfired=misfired,
                    skipped_through_ms=observed_ms - 1 if misfired else None,
                    jittered_for_ms=jittered_ms)


ADMITTED = CommitResult(outcome=CommitOutcome.ADMITTED, disposition=Disposition.ADMIT,
                        run_id="r1")


def test_an_admission_observes_the_lag_under_its_project_and_trigger() -> None:
    registry = new_registry()
    metrics = SchedulerMetrics(registry, Caps(registry, 10).triggers)
    metrics.committed("demo", "nightly", admitted(1_000_000, 1_001_500), ADMITTED)
    samples = scrape(generate_latest(registry))
    lag = "ql_trigger_admission_lag_seconds"
    assert value(samples, f"{lag}_count", project="demo", trigger="nightly") == 1
    assert value(samples, f"{lag}_sum", project="demo", trigger="nightly") == 1.5
    assert value(samples, f"{lag}_bucket", project="demo", trigger="nightly", le="1.0") == 0
    assert value(samples, f"{lag}_bucket", project="demo", trigger="nightly", le="2.5") == 1
    assert value(samples, "ql_trigger_admitted_total", project="demo", trigger="nightly") == 1
    # the historical unlabelled families move too
    assert value(samples, "ql_admitted_total") == 1
    assert value(samples, "ql_admission_lag_seconds_count") == 1
    assert value(samples, "ql_admission_lag_seconds_sum") == 1.5


def test_the_per_trigger_lag_is_measured_from_the_jittered_instant() -> None:
    registry = new_registry()
    metrics = SchedulerMetrics(registry, Caps(registry, 10).triggers)
    metrics.committed("demo", "spread", admitted(1_000_000, 1_030_250, jittered_ms=1_030_000),
                      ADMITTED)
    samples = scrape(generate_latest(registry))
    assert value(samples, "ql_trigger_admission_lag_seconds_sum", project="demo",
                 trigger="spread") == 0.25
    assert value(samples, "ql_admission_lag_seconds_sum") == 30.25  # nominal, as it always was


def test_misfires_and_skips_are_counted_by_policy_and_reason() -> None:
    registry = new_registry()
    metrics = SchedulerMetrics(registry, Caps(registry, 10).triggers)
    metrics.committed("demo", "late", admitted(1_000_000, 2_000_000, misfired=True), ADMITTED)
    skipped = Decision(disposition=Disposition.SKIP, observed_at_ms=2_000_000,
                       due_at_ms=1_000_000, next_fire_at_ms=2_000_000, scheduled_for_ms=None,
                       misfired=True, skipped_through_ms=1_969_999)
    advanced = CommitResult(outcome=CommitOutcome.ADVANCED, disposition=Disposition.SKIP)
    metrics.committed("demo", "dropped", skipped, advanced)
    resumed = Decision(disposition=Disposition.ADMIT, observed_at_ms=2_000_000,
                       due_at_ms=1_990_000, next_fire_at_ms=2_050_000,
                       scheduled_for_ms=1_990_000, misfired=False,
                       paused_from_ms=1_000_000, paused_through_ms=1_989_999)
    metrics.committed("demo", "resumed", resumed, ADMITTED)
    raced = CommitResult(outcome=CommitOutcome.RACED, disposition=Disposition.SKIP,
                         reason="claim_superseded")
    metrics.committed("demo", "raced", skipped, raced)  # a race wrote nothing: not a skip
    samples = scrape(generate_latest(registry))
    assert value(samples, "ql_trigger_misfires_total", project="demo", trigger="late",
                 policy="fire_once") == 1
    assert value(samples, "ql_trigger_skips_total", project="demo", trigger="late",
                 reason="misfire") is None
    assert value(samples, "ql_trigger_misfires_total", project="demo", trigger="dropped",
                 policy="skip") == 1
    assert value(samples, "ql_trigger_skips_total", project="demo", trigger="dropped",
                 reason="misfire") == 1
    assert value(samples, "ql_trigger_skips_total", project="demo", trigger="resumed",
                 reason="paused") == 1
    assert value(samples, "ql_advanced_total", disposition="skip") == 1
    assert value(samples, "ql_raced_total", reason="claim_superseded") == 1
    assert not [key for key in samples if dict(key[1]).get("trigger") == "raced"]
    assert value(samples, "ql_admitted_total") == 2


def test_the_cap_folds_new_triggers_into_other() -> None:
    registry = new_registry()
    caps = Caps(registry, 2)
    metrics = SchedulerMetrics(registry, caps.triggers)
    for trigger in ("t1", "t2", "t3", "t4", "t1"):
        metrics.committed("demo", trigger, admitted(1_000_000, 1_000_100), ADMITTED)
    samples = scrape(generate_latest(registry))
    admitted_by = {dict(key[1])["trigger"]: v for key, v in samples.items()
                   if key[0] == "ql_trigger_admitted_total"}
    assert admitted_by == {"t1": 2, "t2": 1, OTHER: 2}
    assert value(samples, "ql_trigger_admitted_total", project=OTHER, trigger=OTHER) == 2
    assert value(samples, "ql_metrics_label_keys", cap="trigger") == 2
    assert value(samples, "ql_metrics_label_limit", cap="trigger") == 2
    assert value(samples, "ql_metrics_labels_folded_total", cap="trigger") == 2
    # a million triggers make no more series than the cap allows
    for n in range(5_000):
        metrics.committed("demo", f"many-{n}", admitted(1_000_000, 1_000_100), ADMITTED)
    lag_series = {key for key in scrape(generate_latest(registry))
                  if key[0] == "ql_trigger_admission_lag_seconds_count"}
    assert len(lag_series) == 3  # t1, t2 and _other


def test_a_zero_cap_keeps_no_trigger_label() -> None:
    registry = new_registry()
    metrics = SchedulerMetrics(registry, Caps(registry, 0).triggers)
    metrics.committed("demo", "t1", admitted(1_000_000, 1_000_100), ADMITTED)
    samples = scrape(generate_latest(registry))
    assert value(samples, "ql_trigger_admitted_total", project=OTHER, trigger=OTHER) == 1
    assert value(samples, "ql_trigger_admitted_total", project="demo", trigger="t1") is None


def lease(run_id: str, project: str, task: str, trigger: str | None) -> AttemptLease:
    return AttemptLease(fence=LeaseFence(run_id=run_id, attempt_id=f"a-{run_id}", token="t",
                                         generation=1),
                        attempt=1, project_id=project, task_id=task, trigger_id=trigger,
                        scheduled_for_ms=None, expires_at_ms=0, execution=None)


def test_finished_runs_are_counted_per_task_and_trigger_with_their_duration() -> None:
    registry = new_registry()
    caps = Caps(registry, 2)
    metrics = ExecutionMetrics(registry, caps.runs)
    metrics.targets.remember([lease("r1", "demo", "backup", "nightly"),
                              lease("r2", "demo", "backup", None),
                              lease("r3", "demo", "report", "weekly")])
    metrics.observe("r1", "nightly", "succeeded", 2_000)
    metrics.observe("r2", None, "failed", 40)
    metrics.observe("r3", "weekly", "timed_out", 700_000)  # beyond the cap of 2
    active = [3]
    metrics.watch_slots(lambda: active[0])
    metrics.capacity.set(8)
    samples = scrape(generate_latest(registry))
    assert value(samples, "ql_runs_finished_total", project="demo", task="backup",
                 trigger="nightly", status="succeeded") == 1
    assert value(samples, "ql_runs_finished_total", project="demo", task="backup",
                 trigger=NO_TRIGGER, status="failed") == 1
    assert value(samples, "ql_runs_finished_total", project=OTHER, task=OTHER,
                 trigger=OTHER, status="timed_out") == 1
    assert value(samples, "ql_run_duration_seconds_sum", project="demo", task="backup",
                 trigger="nightly") == 2.0
    assert value(samples, "ql_run_duration_seconds_bucket", project="demo", task="backup",
                 trigger="nightly", le="1.0") == 0
    assert value(samples, "ql_run_duration_seconds_bucket", project="demo", task="backup",
                 trigger="nightly", le="5.0") == 1
    assert value(samples, "ql_worker_slots_in_use") == 3
    active[0] = 1  # read when scraped
    assert value(scrape(generate_latest(registry)), "ql_worker_slots_in_use") == 1
    assert value(samples, "ql_worker_slots") == 8
    assert metrics.targets.pop("r1") is None  # forgotten once finished


def test_rescued_attempts_count_lease_takeovers_by_outcome() -> None:
    registry = new_registry()
    metrics = RescueMetrics(registry)
    for outcome in ("requeued", "lost", "lost"):
        metrics.observe(RescuedAttempt(run_id="r", attempt_id="a", previous_status="running",
                                       outcome=outcome, worker=None, pid=None,
                                       executor_handle=None))
    samples = scrape(generate_latest(registry))
    assert value(samples, "ql_attempts_rescued_total", outcome="lost") == 2
    assert value(samples, "ql_attempts_rescued_total", outcome="requeued") == 1


def test_queue_depth_is_read_at_most_every_few_seconds() -> None:
    clock = FakeClock()
    registry = new_registry()
    metrics = QueueMetrics(registry, clock.monotonic)
    reads: list[int] = []

    def read() -> QueueSample:
        reads.append(1)
        return queue_sample(7, clock.now_ms() - 12_000, clock.now_ms())

    assert metrics.refresh(read)
    assert not metrics.refresh(read)
    clock.advance(int(QUEUE_REFRESH_S * 1000))
    assert metrics.refresh(read)
    assert len(reads) == 2
    samples = scrape(generate_latest(registry))
    assert value(samples, "ql_queue_depth") == 7
    assert value(samples, "ql_queue_oldest_age_seconds") == 12
    assert queue_sample(0, None, 5) == QueueSample(0, None)


def test_the_queue_by_requirement_and_what_no_live_worker_can_take() -> None:
    clock = FakeClock()
    registry = new_registry()
    metrics = QueueMetrics(registry, clock.monotonic)
    groups = (RequirementSample("gpu", 3, 4_000, False),
              RequirementSample("gpu,region=us", 2, 9_000, True),
              RequirementSample("licence=x", 1, 20_000, True))
    assert metrics.refresh(lambda: QueueSample(9, 20_000, groups))
    samples = scrape(generate_latest(registry))
    assert value(samples, "ql_queue_requirement_depth", requires="gpu,region=us") == 2
    assert value(samples, "ql_queue_requirement_oldest_age_seconds", requires="gpu") == 4
    assert value(samples, "ql_queue_unplaceable") == 3
    assert value(samples, "ql_queue_unplaceable_oldest_age_seconds") == 20
    clock.advance(int(QUEUE_REFRESH_S * 1000))
    assert metrics.refresh(lambda: QueueSample(3, 1_000, groups[:1]))
    samples = scrape(generate_latest(registry))
    assert value(samples, "ql_queue_requirement_depth", requires="gpu") == 3
    assert value(samples, "ql_queue_requirement_depth", requires="licence=x") is None  # gone
    assert value(samples, "ql_queue_unplaceable") == 0
    assert value(samples, "ql_queue_unplaceable_oldest_age_seconds") == 0


@pytest.mark.parametrize(("raw", "expected"), [(None, 100), ("", 100), ("0", 0), ("2500", 2500)])
def test_the_cap_comes_from_the_environment(raw: str | None, expected: int) -> None:
    environ = {} if raw is None else {TRIGGER_LABELS_ENV: raw}
    assert trigger_label_limit(environ) == expected


@pytest.mark.parametrize("raw", ["-1", "lots", "100001"])
def test_a_bad_cap_is_refused(raw: str) -> None:
    with pytest.raises(InvalidConfig):
        trigger_label_limit({TRIGGER_LABELS_ENV: raw})


def test_published_registries_render_together() -> None:
    first, second = new_registry(), new_registry()
    SchedulerMetrics(first, Caps(first, 1).triggers).cycles.inc()
    RescueMetrics(second)
    publish(first)
    try:
        assert first in published()
        text = render([*published(), second]).decode()
        assert "ql_cycles_total 1.0" in text and "ql_attempts_rescued_total" in text
    finally:
        withdraw(first)
    assert first not in published()


def every_family() -> set[str]:
    """The families of every process's registry (as exposed: counters with _total)."""
    from qinglong.profiles.cluster import Metrics
    from qinglong.profiles.local import LocalMetrics
    from qinglong.profiles.worker import WorkerMetrics
    from qinglong.web.system import process_registry

    names: set[str] = set()
    for registry in (Metrics().registry, WorkerMetrics(5).registry,
                     LocalMetrics(FakeClock(), 5).registry, process_registry()):
        for family in registry.collect():
            names.add(family.name + ("_total" if family.type == "counter" else ""))
    return names | {"ql_instances_alive"}  # made at each scrape of the API


def test_the_docs_list_every_family_and_the_dashboard_uses_only_real_ones() -> None:
    import json
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    families = {name for name in every_family() if name.startswith("ql_")}
    listed = set(re.findall(r"^\| `(ql_[a-z_]+)` \|", (root / "docs" / "metrics.md").read_text(),
                            flags=re.MULTILINE))
    assert listed == families
    dashboard = json.loads((root / "docs" / "grafana" / "qinglong.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert exprs
    used = {re.sub(r"_(bucket|sum|count)$", "", name)
            for expr in exprs for name in re.findall(r"\bql_[a-z_]+", expr)}
    assert used <= families, used - families
    for needed in ("ql_trigger_admission_lag_seconds", "ql_trigger_misfires_total",
                   "ql_trigger_skips_total", "ql_runs_finished_total", "ql_run_duration_seconds",
                   "ql_queue_depth", "ql_attempts_rescued_total", "ql_worker_slots_in_use"):
        assert needed in used, needed
