"""Prometheus metrics shared by every process: `ql control`, `ql worker`, `ql serve` and `ql web`.

Each process keeps its own :class:`~prometheus_client.CollectorRegistry` (never the library's
global one, so a test may run several in one interpreter) built from the families below, so
one family has one name, one type and one label set wherever it appears. docs/metrics.md lists
them all.

**Cardinality.** The families labelled by trigger (``project``, ``trigger``) or by what a Run
ran (``project``, ``task``, ``trigger``) go through a :class:`LabelCap`: the first ``limit``
distinct keys a process sees keep their own labels for the life of the process; every later
key is counted under ``_other`` (a value no project, task or trigger id can take). The limit is
``QL_METRICS_TRIGGER_LABELS`` (default 100, 0 puts everything under ``_other``), so a million
triggers never make more than ``limit + 1`` keys per family and process.

**Publication.** ``ql serve`` runs its scheduler and executor in the process that also serves
the HTTP API (``--http``); the API's ``/metrics`` shows every registry published here with
:func:`publish` beside its own.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from qinglong.domain.decision import Decision, Disposition
from qinglong.errors import InvalidConfig
from qinglong.storage.admission.params import CommitOutcome, CommitResult
from qinglong.storage.runs.params import AttemptLease, RescuedAttempt

CONTENT_TYPE = CONTENT_TYPE_LATEST
OTHER = "_other"  # the bucket of keys beyond the cap (no project, task or trigger id starts with _)
NO_TRIGGER = "_none"  # the trigger label of a Run that no trigger admitted (a task run now)
TRIGGER_LABELS_ENV = "QL_METRICS_TRIGGER_LABELS"
DEFAULT_TRIGGER_LABELS = 100
MAX_TRIGGER_LABELS = 100_000
QUEUE_REFRESH_S = 5.0  # queue depth is read at most this often (one indexed count)
PLACEMENT_GROUPS = 50  # requirement sets shown by the queue's per-requirement gauges
QUEUE_COUNT_CAP = 1_000_000  # queued Runs counted at most (the gauge then reads this value)

# seconds; ql_admission_lag_seconds has always had these buckets
LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
DURATION_BUCKETS = (0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 10800.0)

TRIGGER_LABELS = ("project", "trigger")
RUN_LABELS = ("project", "task", "trigger")


def trigger_label_limit(environ: Mapping[str, str] | None = None) -> int:
    """The cap on distinct trigger (and Run target) label keys per family and process."""
    raw = (os.environ if environ is None else environ).get(TRIGGER_LABELS_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_TRIGGER_LABELS
    text = raw.strip()
    if not text.isdigit() or int(text) > MAX_TRIGGER_LABELS:
        raise InvalidConfig(TRIGGER_LABELS_ENV,
                            f"must be a whole number from 0 to {MAX_TRIGGER_LABELS}")
    return int(text)


def new_registry() -> CollectorRegistry:
    return CollectorRegistry(auto_describe=True)


class CapMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.keys = Gauge("ql_metrics_label_keys",
                          "Distinct label keys kept by a cardinality cap (the rest are _other)",
                          ["cap"], registry=registry)
        self.limit = Gauge("ql_metrics_label_limit", "The cap on distinct label keys",
                           ["cap"], registry=registry)
        self.folded = Counter("ql_metrics_labels_folded_total",
                              "Observations counted under _other because the cap was reached",
                              ["cap"], registry=registry)


class LabelCap:
    """The first ``limit`` distinct keys keep their labels; later keys fold into ``_other``.

    Thread-safe. ``kind`` names the cap in ``ql_metrics_label_keys``,
    ``ql_metrics_label_limit`` and ``ql_metrics_labels_folded_total``."""

    def __init__(self, kind: str, limit: int, meta: CapMetrics) -> None:
        if not 0 <= limit <= MAX_TRIGGER_LABELS:
            raise InvalidConfig(TRIGGER_LABELS_ENV,
                                f"must be a whole number from 0 to {MAX_TRIGGER_LABELS}")
        self.kind = kind
        self.limit = limit
        self._kept: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()
        self._folded = meta.folded.labels(kind)
        meta.keys.labels(kind).set_function(lambda: float(self.kept))
        meta.limit.labels(kind).set(limit)

    def key(self, *values: str) -> tuple[str, ...]:
        with self._lock:
            if values in self._kept:
                return values
            if len(self._kept) < self.limit:
                self._kept.add(values)
                return values
        self._folded.inc()
        return (OTHER,) * len(values)

    @property
    def kept(self) -> int:
        with self._lock:
            return len(self._kept)


class Caps:
    """A process's caps: ``trigger`` keys (project, trigger) of the scheduler families and
    ``run`` keys (project, task, trigger) of the execution families."""

    def __init__(self, registry: CollectorRegistry, limit: int | None = None) -> None:
        chosen = trigger_label_limit() if limit is None else limit
        meta = CapMetrics(registry)
        self.triggers = LabelCap("trigger", chosen, meta)
        self.runs = LabelCap("run", chosen, meta)


class SchedulerMetrics:
    """What a scheduler decided and committed: `ql control` replicas and `ql serve`.

    The unlabelled families are the historical ones of `ql control` (kept as they were);
    the ``ql_trigger_*`` families carry ``project`` and ``trigger`` under the cap."""

    def __init__(self, registry: CollectorRegistry, triggers: LabelCap) -> None:
        self._triggers = triggers
        self.admitted = Counter("ql_admitted_total", "Runs admitted", registry=registry)
        self.advanced = Counter("ql_advanced_total", "Cursor moves without a Run",
                                ["disposition"], registry=registry)
        self.raced = Counter("ql_raced_total", "Commits that lost a race", ["reason"],
                             registry=registry)
        self.cycles = Counter("ql_cycles_total", "Scheduler cycles", registry=registry)
        self.errors = Counter("ql_errors_total", "Scheduler errors", ["code"], registry=registry)
        self.lag = Histogram("ql_admission_lag_seconds",
                             "Observation (claim) time minus scheduled time of admitted Runs",
                             buckets=LAG_BUCKETS, registry=registry)
        self.trigger_lag = Histogram(
            "ql_trigger_admission_lag_seconds",
            "Per trigger: observation (claim) time minus the occurrence's due time",
            TRIGGER_LABELS, buckets=LAG_BUCKETS, registry=registry)
        self.trigger_admitted = Counter("ql_trigger_admitted_total",
                                        "Per trigger: Runs admitted by the schedule",
                                        TRIGGER_LABELS, registry=registry)
        # each key's two children of the families every admission updates, as labels() gave
        # them (the keys are capped, so is this; a hot path of a burst)
        self._admission_children: dict[tuple[str, ...], tuple[Counter, Histogram]] = {}
        self.misfires = Counter(
            "ql_trigger_misfires_total",
            "Per trigger: decisions that found the occurrence later than the grace, by the "
            "misfire policy that applied (fire_once admitted one Run, skip none)",
            [*TRIGGER_LABELS, "policy"], registry=registry)
        self.skips = Counter(
            "ql_trigger_skips_total",
            "Per trigger: decisions that dropped occurrences, by reason (misfire: the late "
            "occurrence under policy skip; paused: occurrences held back by a pause)",
            [*TRIGGER_LABELS, "reason"], registry=registry)

    def committed(self, project: str, trigger: str, decision: Decision,
                  result: CommitResult) -> None:
        """One committed decision (``decision.observed_at_ms`` is the claim time on the cluster,
        the node clock on SQLite)."""
        if result.outcome is CommitOutcome.RACED:
            self.raced.labels(result.reason or "unknown").inc()
            return  # nothing happened: a race writes nothing
        key = self._triggers.key(project, trigger)
        if result.outcome is CommitOutcome.ADMITTED:
            children = self._admission_children.get(key)
            if children is None:
                children = self._admission_children[key] = (
                    self.trigger_admitted.labels(*key), self.trigger_lag.labels(*key))
            self.admitted.inc()
            children[0].inc()
            if decision.scheduled_for_ms is not None:
                self.lag.observe(max(0, decision.observed_at_ms - decision.scheduled_for_ms)
                                 / 1000)
                due = decision.jittered_for_ms if decision.jittered_for_ms is not None else (
                    decision.scheduled_for_ms)
                children[1].observe(max(0, decision.observed_at_ms - due) / 1000)
        else:
            self.advanced.labels(decision.disposition.value).inc()
        if decision.misfired:
            policy = "fire_once" if decision.disposition is Disposition.ADMIT else "skip"
            self.misfires.labels(*key, policy).inc()
            if decision.disposition is Disposition.SKIP:
                self.skips.labels(*key, "misfire").inc()
        if decision.paused_from_ms is not None:
            self.skips.labels(*key, "paused").inc()


class RescueMetrics:
    """Lease takeovers: Attempts whose lease expired, settled by a reconciler."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.rescued = Counter("ql_attempts_rescued_total",
                               "Attempts whose lease expired, by what the reconciler did "
                               "(requeued: never started; lost: started, its Run lost or retried)",
                               ["outcome"], registry=registry)

    def observe(self, attempt: RescuedAttempt) -> None:
        self.rescued.labels(attempt.outcome).inc()


@dataclass(frozen=True, slots=True)
class RunTarget:
    project: str
    task: str
    trigger: str | None


class LeaseTargets:
    """What each leased Run runs (project, task, trigger), remembered from its lease until it
    finishes: the executor reports a finished Run by id. Bounded: the oldest entries go first."""

    MAX = 8192

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._targets: OrderedDict[str, RunTarget] = OrderedDict()

    def remember(self, leases: Iterable[AttemptLease]) -> None:
        with self._lock:
            for lease in leases:
                self._targets[lease.fence.run_id] = RunTarget(lease.project_id, lease.task_id,
                                                              lease.trigger_id)
                self._targets.move_to_end(lease.fence.run_id)
            while len(self._targets) > self.MAX:
                self._targets.popitem(last=False)

    def pop(self, run_id: str) -> RunTarget | None:
        with self._lock:
            return self._targets.pop(run_id, None)


class ExecutionMetrics:
    """What an executor ran: `ql worker` and the executor inside `ql serve`."""

    def __init__(self, registry: CollectorRegistry, runs: LabelCap) -> None:
        self._runs = runs
        self.targets = LeaseTargets()
        self.finished = Counter("ql_runs_finished_total",
                                "Attempts this process ran to an end, by outcome, per task and "
                                "trigger (_none: a Run no trigger admitted)",
                                [*RUN_LABELS, "status"], registry=registry)
        self.duration = Histogram("ql_run_duration_seconds",
                                  "How long commands ran, per task and trigger",
                                  RUN_LABELS, buckets=DURATION_BUCKETS, registry=registry)
        self.slots = Gauge("ql_worker_slots_in_use", "Commands running now",
                           registry=registry)
        self.capacity = Gauge("ql_worker_slots", "Commands this process may run at once",
                              registry=registry)

    def watch_slots(self, active: Callable[[], int]) -> None:
        """Read the slots in use when scraped (no polling in between)."""
        self.slots.set_function(lambda: float(active()))

    def observe(self, run_id: str, trigger_id: str | None, status: str,
                duration_ms: int) -> None:
        target = self.targets.pop(run_id)
        key: tuple[str, ...]
        if target is None:  # leased before this process watched it: counted under _other
            key = (OTHER, OTHER, OTHER)
        else:
            trigger = trigger_id if trigger_id is not None else (
                target.trigger if target.trigger is not None else NO_TRIGGER)
            key = self._runs.key(target.project, target.task, trigger)
        self.finished.labels(*key, status).inc()
        self.duration.labels(*key).observe(max(0, duration_ms) / 1000)


@dataclass(frozen=True, slots=True)
class RequirementSample:
    """Queued Runs that require one set of worker labels (docs/controls/placement.md)."""

    requires: str  # the labels, comma-separated: the metric's label value
    depth: int
    oldest_age_ms: int
    unplaceable: bool  # no live executor offers them all


@dataclass(frozen=True, slots=True)
class QueueSample:
    depth: int  # queued Runs (at most QUEUE_COUNT_CAP)
    oldest_age_ms: int | None  # how long the oldest queued Run has waited (None: none queued)
    requirements: tuple[RequirementSample, ...] = ()


class QueueMetrics:
    """Queue depth, read by a background loop at most every ``QUEUE_REFRESH_S`` seconds (one
    indexed count), never by a scrape."""

    def __init__(self, registry: CollectorRegistry, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self._read_at: float | None = None
        self.depth = Gauge("ql_queue_depth", "Queued Runs waiting for an executor",
                           registry=registry)
        self.oldest = Gauge("ql_queue_oldest_age_seconds",
                            "How long the oldest queued Run has waited (0: none queued)",
                            registry=registry)
        self.by_requirement = Gauge(
            "ql_queue_requirement_depth", "Queued Runs that require this set of worker labels "
            f"(the {PLACEMENT_GROUPS} largest sets)", ["requires"], registry=registry)
        self.by_requirement_oldest = Gauge(
            "ql_queue_requirement_oldest_age_seconds",
            "How long the oldest queued Run that requires this set of labels has waited",
            ["requires"], registry=registry)
        self.unplaceable = Gauge(
            "ql_queue_unplaceable", "Queued Runs whose required labels no live worker offers",
            registry=registry)
        self.unplaceable_oldest = Gauge(
            "ql_queue_unplaceable_oldest_age_seconds",
            "How long the oldest queued Run no live worker can take has waited (0: none)",
            registry=registry)

    def refresh(self, read: Callable[[], QueueSample]) -> bool:
        """Read the queue if the last reading is old enough; True when it read."""
        now = self._monotonic()
        if self._read_at is not None and now - self._read_at < QUEUE_REFRESH_S:
            return False
        self._read_at = now
        sample = read()
        self.depth.set(sample.depth)
        self.oldest.set(0 if sample.oldest_age_ms is None else max(0, sample.oldest_age_ms) / 1000)
        self.by_requirement.clear()  # a set no longer queued disappears
        self.by_requirement_oldest.clear()
        blocked = [group for group in sample.requirements if group.unplaceable]
        for group in sample.requirements:
            self.by_requirement.labels(group.requires).set(group.depth)
            self.by_requirement_oldest.labels(group.requires).set(
                max(0, group.oldest_age_ms) / 1000)
        self.unplaceable.set(sum(group.depth for group in blocked))
        self.unplaceable_oldest.set(max((max(0, g.oldest_age_ms) for g in blocked), default=0)
                                    / 1000)
        return True


def queue_sample(depth: int, oldest_ms: int | None, now_ms: int) -> QueueSample:
    """Queue depth and the age of its oldest Run at ``now_ms``."""
    return QueueSample(depth, None if oldest_ms is None else now_ms - oldest_ms)


# -- publication (one process, several registries) ------------------------------------------

_published: dict[int, CollectorRegistry] = {}
_published_lock = threading.Lock()


def publish(registry: CollectorRegistry) -> None:
    """Show ``registry`` on the HTTP API's /metrics of this process."""
    with _published_lock:
        _published[id(registry)] = registry


def withdraw(registry: CollectorRegistry) -> None:
    with _published_lock:
        _published.pop(id(registry), None)


def published() -> list[CollectorRegistry]:
    with _published_lock:
        return list(_published.values())


def render(registries: Iterable[CollectorRegistry]) -> bytes:
    """The text exposition of several registries, one after the other (their families must
    not share names)."""
    return b"".join(generate_latest(registry) for registry in registries)
