"""Backfill as the surfaces ask for it: `ql trigger backfill` (and the HTTP API when it comes).

`Backfills.plan` reads what the window is judged against and which of its occurrences already
have a Run, and refuses (writing nothing) a window that is not the trigger's past or is too
long. `Backfills.run` then admits the rest in order, one transaction each, paced to a rate
on the injected clock, reporting progress now and then, and stopping between two admissions
when asked to (a ``threading.Event``: Ctrl-C in the CLI) or at the first error. Whatever
stopped it, what was admitted stays admitted, and running the same backfill again carries on
where it stopped: every occurrence has at most one Run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from qinglong.clock import Clock
from qinglong.domain.backfill import (
    BackfillRequest,
    BackfillTarget,
    check_rate,
    window_occurrences,
)
from qinglong.errors import QinglongError
from qinglong.service.times import rfc3339
from qinglong.service.views.base import instant
from qinglong.service.views.reports import BackfilledRun, BackfillView
from qinglong.storage.admission import RequestAdmissions
from qinglong.storage.admission.params import BackfillAdmitParams

DEFAULT_PROGRESS_EVERY_S = 3.0


def _wait_for_stop(seconds: float, stop: threading.Event) -> bool:
    """Wait up to ``seconds`` (an event wait, like qinglong.clock.pause); True when stopped."""
    return stop.wait(seconds)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackfillPlan:
    request: BackfillRequest
    target: BackfillTarget
    occurrences: tuple[int, ...]  # the window's occurrences of the current schedule, in order
    existing: Mapping[int, str]  # those that already had a Run when planned -> that Run

    @property
    def to_admit(self) -> tuple[int, ...]:
        return tuple(o for o in self.occurrences if o not in self.existing)


@dataclass(slots=True, kw_only=True)
class BackfillProgress:
    """How far a backfill got: its counts so far, or in the end its summary."""

    occurrences: int
    admitted: int = 0
    existing: int = 0  # already had a Run (when planned, or found at admission)
    in_doubt: int = 0  # admitted, found by key after a lost COMMIT reply
    elapsed_s: float = 0.0
    next_ms: int | None = None  # the first occurrence not done yet (None: all done)
    runs: list[tuple[int, str]] = field(default_factory=list)  # (occurrence, Run) admitted
    state: str = "running"  # then done, interrupted or failed
    error: QinglongError | None = None

    @property
    def skipped(self) -> int:
        """Occurrences not reached: the backfill stopped first (a rerun does them)."""
        return self.occurrences - self.admitted - self.existing

    @property
    def done(self) -> int:
        return self.admitted + self.existing


class Backfills:
    def __init__(self, store: RequestAdmissions, clock: Clock, *,
                 wait: Callable[[float, threading.Event], bool] = _wait_for_stop) -> None:
        self._store = store
        self._clock = clock
        self._wait = wait

    def plan(self, request: BackfillRequest) -> BackfillPlan:
        target = self._store.backfill_target(request.project_id, request.trigger_id)
        occurrences = window_occurrences(request, target)
        found = (self._store.backfill_runs(request.project_id, request.trigger_id,
                                           request.from_ms, request.to_ms)
                 if occurrences else {})
        wanted = set(occurrences)  # a Run off the current schedule (an older revision's) stays
        return BackfillPlan(request=request, target=target, occurrences=occurrences,
                            existing={o: r for o, r in found.items() if o in wanted})

    def run(self, plan: BackfillPlan, *, rate: float, stop: threading.Event,
            on_progress: Callable[[BackfillProgress], None] | None = None,
            progress_every_s: float = DEFAULT_PROGRESS_EVERY_S) -> BackfillProgress:
        """Admit the plan's occurrences that have no Run, in order, at most ``rate`` admissions
        per second; stop between two admissions once ``stop`` is set, or at the first error
        (kept in the result, whose counts say how far it got)."""
        interval = 1.0 / check_rate(rate)
        clock = self._clock
        progress = BackfillProgress(occurrences=len(plan.occurrences))
        started = clock.monotonic()
        next_at = last_report = started
        for occurrence in plan.occurrences:
            progress.next_ms = occurrence
            if stop.is_set():
                progress.state = "interrupted"
                break
            if occurrence in plan.existing:
                progress.existing += 1
                continue
            delay = next_at - clock.monotonic()
            if delay > 0 and self._wait(delay, stop):
                progress.state = "interrupted"
                break
            began = clock.monotonic()
            try:
                result = self._store.backfill_admit(BackfillAdmitParams(
                    request=plan.request, trigger_revision=plan.target.trigger.revision,
                    occurrence_ms=occurrence))
            except QinglongError as exc:
                progress.state, progress.error = "failed", exc
                break
            next_at = max(next_at, began) + interval  # paced from here, never in a burst
            if result.admitted:
                progress.admitted += 1
                progress.runs.append((occurrence, result.run_id))
            else:
                progress.existing += 1
            progress.in_doubt += result.in_doubt
            now = clock.monotonic()
            if on_progress is not None and now - last_report >= progress_every_s:
                last_report = now
                progress.elapsed_s = now - started
                on_progress(progress)
        else:
            progress.next_ms = None
            progress.state = "done"
        progress.elapsed_s = clock.monotonic() - started
        return progress


def _window(plan: BackfillPlan) -> dict[str, Any]:
    """The fields of the window, the plan's and the summary's alike."""
    request, target = plan.request, plan.target
    return {
        "project": request.project_id,
        "trigger": request.trigger_id,
        "trigger_revision": target.trigger.revision,
        "kind": target.trigger.spec.kind,
        "schedule": target.trigger.spec.expression,
        "cron": target.trigger.spec.cron_expression,
        "timezone": target.trigger.spec.timezone,
        "from_": instant(request.from_ms),
        "from_ms": request.from_ms,
        "to": instant(request.to_ms),
        "to_ms": request.to_ms,
        # occurrences from here on are the scheduler's (None: it has decided every one)
        "horizon": None if target.finished else rfc3339(target.horizon_ms),
        "horizon_ms": None if target.finished else target.horizon_ms,
        "actor": request.actor,
        "occurrences": len(plan.occurrences),
    }


def plan_view(plan: BackfillPlan) -> BackfillView:
    """The window and what it holds (the whole answer of a dry run)."""
    return BackfillView(**_window(plan), already_had_run=len(plan.existing),
                        to_admit=len(plan.to_admit), to_admit_ms=list(plan.to_admit),
                        dry_run=True)


def summary_view(plan: BackfillPlan, progress: BackfillProgress, rate: float) -> BackfillView:
    return BackfillView(
        **_window(plan),
        already_had_run=progress.existing,
        to_admit=len(plan.to_admit),
        dry_run=False,
        state=progress.state,
        rate=rate,
        admitted=progress.admitted,
        skipped=progress.skipped,
        in_doubt=progress.in_doubt,
        next=rfc3339(progress.next_ms),
        next_ms=progress.next_ms,
        elapsed_ms=round(progress.elapsed_s * 1000),
        runs=[BackfilledRun(scheduled_for=instant(at), scheduled_for_ms=at, run_id=run_id)
              for at, run_id in progress.runs])
