"""The views of the dashboard: a page of triggers, each with its state, next fire time,
latest Run and what its latest Runs say (GET /api/v1/triggers/summary)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from qinglong.service.views.base import Instant, OptionalInstant, ViewModel, one_of
from qinglong.service.views.triggers import PauseView


class LastRunView(ViewModel):
    id: str
    status: str
    trigger_type: str = Field(description="cron (its schedule admitted it), manual (fired "
                                          "now) or backfill")
    scheduled_for: Instant = Field(description="Its occurrence")
    scheduled_for_ms: int
    created_at: Instant = Field(description="When it was admitted")
    created_at_ms: int
    started_at: OptionalInstant
    finished_at: OptionalInstant
    admission_lag_ms: int | None = Field(
        description="How late it was admitted after its occurrence (null for a Run fired now "
                    "or backfilled)")


class RunWindowView(ViewModel):
    runs: int = Field(description="How many Runs the window holds (at most window_runs)")
    successes: int
    failures: int = Field(description="Failed, timed out or lost")
    cancelled: int
    skipped: int = Field(description="Ended by the trigger's overlap policy")
    success_rate: float | None = Field(
        description="successes / (successes + failures + cancelled), 4 places; null when "
                    "none of them ended so (skipped and unfinished Runs are left out)")
    max_lag_ms: int | None = Field(
        description="The largest admission lag among the window's Runs its schedule admitted")


class TriggerSummaryView(ViewModel):
    project: str
    trigger: str
    task: str
    kind: Annotated[str, one_of("cron", "interval", "once")]
    schedule: str
    timezone: str
    enabled: bool
    state: str = Field(description="firing, paused, disabled, stale-pin, archived or done")
    pause: PauseView | None
    next_fire_at: OptionalInstant
    next_fire_at_ms: int | None
    next_due_at_ms: int | None = Field(description="When the next occurrence becomes due "
                                                   "(its jittered instant)")
    last_run: LastRunView | None = Field(description="Its latest Run by occurrence")
    window: RunWindowView = Field(description="What its latest window_runs Runs say")
    labels: list[str] | None = Field(default=None, description=(
        "Its labels, sorted (organising tags set beside the revisions: PUT .../labels); "
        "in listings and shows"))
    pinned: bool | None = Field(default=None, description=(
        "Whether you pinned it (GET /api/v1/me/pins): in the API's listings asked ?pins=true"))


class TriggerSummaryPageView(ViewModel):
    items: list[TriggerSummaryView]
    window_runs: int = Field(description="The window: each trigger's latest N Runs by "
                                         "occurrence")
    at: Instant = Field(description="When the summary was made (next fire times are after it)")
    at_ms: int
    next_cursor: str | None = Field(description="Send it as ?cursor= with the same project for "
                                                "the next page; null: no more")
