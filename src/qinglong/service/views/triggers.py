"""The views of triggers: a revision with its schedule's parts, and a trigger with its state,
its pause and its next fire times."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from qinglong.domain.interval import IntervalSchedule
from qinglong.domain.model import TriggerView as TriggerHead
from qinglong.domain.occurrences import is_done_cursor
from qinglong.domain.once import OnceSchedule
from qinglong.domain.trigger import TriggerRevision
from qinglong.service.schedule import jittered, trigger_done, trigger_upcoming
from qinglong.service.times import in_zone, rfc3339
from qinglong.service.views.base import Instant, OptionalInstant, ViewModel, instant, one_of


class DstView(ViewModel):
    gap: Annotated[str, one_of("shift", "skip")]
    overlap: Annotated[str, one_of("first", "second", "both")]


class JitterView(ViewModel):
    max_s: int
    random_s: int
    stable_s: int = Field(description="The offset every occurrence of this trigger gets")


class TriggerRevisionView(ViewModel):
    project: str
    trigger: str
    revision: int
    task: str
    task_revision: int
    task_content_digest: str
    kind: Annotated[str, one_of("cron", "interval", "once")]
    schedule: str = Field(description="The schedule's canonical text")
    cron: str | None = Field(description="The cron expression (null for other kinds)")
    dst: DstView | None = Field(default=None, description="cron: the DST policy")
    every_s: int | None = Field(default=None, description="interval: the period")
    anchor: OptionalInstant = Field(default=None, description="interval: an instant it fires at")
    anchor_ms: int | None = None
    at: OptionalInstant = Field(default=None, description="once: when it fires")
    at_ms: int | None = None
    timezone: str
    misfire: str
    overlap: str
    overlap_queue_limit: int
    jitter: JitterView | None
    flow: str | None = Field(default=None, description="The flow each occurrence starts "
                                                       "(null: a Run of the task)")
    parameters: dict[str, str | int | bool] = Field(
        default_factory=dict, description="Values the trigger gives its Runs' parameters")
    enabled: bool
    content_digest: str
    published_at: Instant
    published_at_ms: int


class TriggerPublishView(TriggerRevisionView):
    created: bool
    restored: bool


class PauseView(ViewModel):
    since: Instant
    since_ms: int
    until: OptionalInstant
    until_ms: int | None
    reason: str | None


class TriggerView(TriggerRevisionView):
    state: str = Field(description="firing, paused, disabled, stale-pin, archived, deleted or "
                                   "done")
    done: bool
    pause: PauseView | None
    deleted_at: OptionalInstant
    next_fire_at: list[str]
    next_fire_at_ms: list[int]
    next_fire_local: list[str] = Field(description="The same instants in the trigger's zone")
    next_due_at: list[str] = Field(description="When each becomes due: its jittered instant")
    next_due_at_ms: list[int]
    cursor_ms: int | None = Field(description="The first occurrence not decided yet")
    last_scheduled_at: OptionalInstant
    labels: list[str] | None = Field(default=None, description=(
        "Its labels, sorted (organising tags set beside the revisions: PUT .../labels); "
        "in listings and shows"))
    pinned: bool | None = Field(default=None, description=(
        "Whether you pinned it (GET /api/v1/me/pins): in the API's listings asked ?pins=true"))


def jitter_view(revision: TriggerRevision) -> JitterView | None:
    """The trigger's jitter: its bound, the part drawn per occurrence, and the stable offset
    (a hash of the trigger's identity) every occurrence gets."""
    jitter = revision.spec.jitter
    if jitter is None:
        return None
    return JitterView(max_s=jitter.max_s, random_s=jitter.random_s,
                      stable_s=jitter.stable_s(revision.project_id, revision.trigger_id))


def trigger_revision_view(revision: TriggerRevision) -> TriggerRevisionView:
    """The revision; of its schedule the kind and canonical text (the cron expression,
    ``every 1m30s from ...``, ``at ...``), and only for its kind: ``cron`` and ``dst`` (the
    DST policy: ``gap``, ``overlap``), ``every_s`` and ``anchor``, or ``at``."""
    spec = revision.spec
    schedule = spec.schedule
    parts: dict[str, Any] = {}
    if spec.dst is not None:  # the DST policy of a cron trigger (docs/reference/cron.md)
        parts["dst"] = DstView(gap=spec.dst.gap.value, overlap=spec.dst.overlap.value)
    if isinstance(schedule, IntervalSchedule):
        parts.update(every_s=schedule.every_s, anchor=rfc3339(schedule.anchor_ms),
                     anchor_ms=schedule.anchor_ms)
    elif isinstance(schedule, OnceSchedule):
        parts.update(at=rfc3339(schedule.at_ms), at_ms=schedule.at_ms)
    return TriggerRevisionView(
        project=revision.project_id, trigger=revision.trigger_id, revision=revision.revision,
        task=revision.task_id, task_revision=revision.task_revision,
        task_content_digest=revision.task_content_digest, kind=spec.kind,
        schedule=spec.expression, cron=spec.cron_expression, **parts,
        timezone=spec.timezone, misfire=spec.misfire_policy.value,
        overlap=spec.overlap.policy.value, overlap_queue_limit=spec.overlap.queue_limit,
        jitter=jitter_view(revision), flow=spec.flow, parameters=spec.values,
        enabled=revision.enabled,
        content_digest=revision.content_digest, published_at=instant(revision.created_at_ms),
        published_at_ms=revision.created_at_ms)


def trigger_view(view: TriggerHead, *, now_ms: int, next_count: int) -> TriggerView:
    upcoming = trigger_upcoming(view, now_ms=now_ms, count=next_count)
    due = jittered(view.revision, upcoming)
    schedule = view.schedule
    done = trigger_done(view)
    return trigger_revision_view(view.revision).extended(
        TriggerView,
        state="done" if done else view.state_at(now_ms),
        done=done,
        pause=pause_view(view, now_ms),
        deleted_at=rfc3339(view.deleted_at_ms),
        next_fire_at=[rfc3339(t) for t in upcoming],
        next_fire_at_ms=upcoming,
        next_fire_local=[in_zone(t, view.revision.spec.timezone) for t in upcoming],
        # when each becomes due: its jittered instant (the same as next_fire_at without jitter)
        next_due_at=[rfc3339(t) for t in due],
        next_due_at_ms=due,
        # the first occurrence not decided yet (None: none decided yet, or none is left)
        cursor_ms=(None if schedule is None or is_done_cursor(schedule.next_fire_at_ms)
                   else schedule.next_fire_at_ms),
        last_scheduled_at=rfc3339(schedule.last_scheduled_at_ms) if schedule else None)


def pause_view(view: TriggerHead, now_ms: int) -> PauseView | None:
    """The pause holding the trigger back at ``now_ms``, if one does."""
    pause = view.schedule.pause if view.schedule else None
    if pause is None or not pause.in_effect_at(now_ms):
        return None
    return PauseView(since=instant(pause.from_ms), since_ms=pause.from_ms,
                     until=rfc3339(pause.until_ms), until_ms=pause.until_ms,
                     reason=view.pause_reason)
