"""The views of what the service works out about triggers and Runs: a schedule preview, a
trigger's occurrence ledger, stats per task and day, and a backfill (its plan, or what it
admitted). Their builders are beside what they report on (``service.preview``,
``service.ledger``, ``service.stats``, ``service.backfill``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from qinglong.service.views.base import Instant, OptionalInstant, ViewModel, one_of
from qinglong.service.views.system import Problem
from qinglong.service.views.triggers import DstView, JitterView


class PreviewOccurrence(ViewModel):
    n: int
    local: str
    utc: Instant
    at_ms: int
    dst: Annotated[str | None, one_of("gap-shifted", "overlap-first", "overlap-second", None)]
    skipped: list[str] = Field(description="Local wall times a DST gap skipped just before "
                                           "this occurrence (the policy gap: skip)")
    note: str
    # only with a jitter: when the occurrence becomes due, and how long after its nominal time
    jittered_utc: Instant | None = None
    jittered_at_ms: int | None = None
    jitter_s: int | None = None


class PreviewView(ViewModel):
    kind: Annotated[str, one_of("cron", "interval", "once")]
    schedule: str
    cron: str | None
    timezone: str
    dst: DstView | None = Field(description="The DST policy previewed (null: the default)")
    jitter: JitterView | None = Field(description="The jitter previewed, with the trigger's "
                                                  "stable offset (null: none)")
    occurrences: list[PreviewOccurrence]


class LedgerRunView(ViewModel):
    id: str
    status: str
    type: str


class LedgerOccurrence(ViewModel):
    at: Instant
    at_ms: int
    local: str
    revision: int
    fate: Annotated[str, one_of("ran", "duplicate", "skipped", "paused", "archived", "due",
                                "pending", "superseded", "missing")]
    runs: list[LedgerRunView]
    due_at: OptionalInstant = Field(default=None, description="With jitter: when it became due")
    due_at_ms: int | None = None


class LedgerView(ViewModel):
    project: str
    trigger: str
    from_: Instant = Field(serialization_alias="from")
    from_ms: int
    to: Instant
    to_ms: int
    occurrences: list[LedgerOccurrence]
    not_shown: int
    counts: dict[str, int]


class DayCounts(ViewModel):
    task: str
    runs: int
    successes: int
    failures: int = Field(description="failed, timed out or lost")
    cancelled: int = Field(description="cancelled, except by an overlap policy")
    skipped: int = Field(description="ended by the trigger's overlap policy (skip, a full "
                                     "queue, cancel_previous): neither success nor failure")
    total_duration_ms: int
    max_duration_ms: int | None
    success_rate: float | None = Field(description="successes / (successes + failures + "
                                                   "cancelled); null when that is 0")


class DayRow(ViewModel):
    task: str
    date: str
    runs: int
    successes: int
    failures: int
    cancelled: int
    skipped: int
    total_duration_ms: int
    max_duration_ms: int | None
    success_rate: float | None


class StatsView(ViewModel):
    project: str
    task: str | None
    timezone: str
    from_: str = Field(serialization_alias="from")
    to: str
    days: list[DayRow]
    totals: list[DayCounts]


class BackfilledRun(ViewModel):
    scheduled_for: Instant
    scheduled_for_ms: int
    run_id: str


class BackfillView(ViewModel):
    project: str
    trigger: str
    trigger_revision: int
    kind: str
    schedule: str
    cron: str | None
    timezone: str
    from_: Instant = Field(serialization_alias="from")
    from_ms: int
    to: Instant
    to_ms: int
    horizon: OptionalInstant
    horizon_ms: int | None
    actor: str
    occurrences: int
    already_had_run: int
    to_admit: int | None = Field(default=None, description="Dry run: how many would be admitted")
    to_admit_ms: list[int] | None = Field(default=None, description="Dry run: their instants")
    dry_run: bool
    state: Annotated[str | None, one_of("done", "interrupted", "failed", None)] = Field(
        default=None, description="interrupted: the server stopped; failed: see error")
    rate: float | None = Field(default=None, description="Admissions per second at most")
    admitted: int | None = None
    skipped: int | None = Field(default=None, description="Not reached: the backfill stopped "
                                                          "first (send it again to carry on)")
    in_doubt: int | None = None
    next: OptionalInstant = None
    next_ms: int | None = None
    elapsed_ms: int | None = None
    runs: list[BackfilledRun] | None = None
    error: Problem | None = Field(default=None, description="Why a backfill that had admitted "
                                                            "Runs stopped")
