"""The dashboard's summary of triggers: one page at a time, each trigger with its state,
next fire time, latest Run, success rate and lag, read set-based (storage/dashboard.py: one
statement per page, whatever the number of triggers).

Definitions (the same as service/stats.py and the Run views):

- the **window** is each trigger's latest ``window`` Runs by occurrence (``scheduled_for``,
  newest first; a Run fired now has its admission as occurrence), 50 by default;
- the **success rate** is successes over the Runs of the window that ended by themselves or
  were cancelled (a lost, failed or timed-out Run is a failure; a Run its overlap policy
  ended is skipped and left out, as are Runs not ended yet): ``stats.success_rate``;
- the **lag** of a Run is its admission lag, how long after its occurrence it was admitted
  (``created_at - scheduled_for``, jitter included), for Runs the schedule admitted (not
  fired now, not backfilled); the window's largest is ``max_lag_ms`` (its p99 for a window
  of up to 100 Runs), the latest Run's own is ``last_run.admission_lag_ms``;
- the **next fire time** comes from the trigger's cursor as ``GET /api/v1/triggers`` shows it.

A page lists current (not deleted) triggers in (project, trigger) order; ``next_cursor``
names the last one shown, so the next page starts exactly after it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Collection

from qinglong.clock import Clock
from qinglong.domain.identifiers import entity_id, project_id
from qinglong.domain.runs import TRIGGER_TYPE_BACKFILL, TRIGGER_TYPE_MANUAL
from qinglong.errors import InvalidInput
from qinglong.service.labels import label_filter, with_labels
from qinglong.service.schedule import jittered, trigger_done, trigger_upcoming
from qinglong.service.stats import success_rate
from qinglong.service.times import rfc3339
from qinglong.service.views.base import instant
from qinglong.service.views.dashboard import (
    LastRunView,
    RunWindowView,
    TriggerSummaryPageView,
    TriggerSummaryView,
)
from qinglong.service.views.triggers import pause_view
from qinglong.storage.dashboard import (
    DashboardStore,
    LastRun,
    RunWindow,
    TriggerSummaryParams,
    TriggerSummaryRow,
)
from qinglong.storage.labels import LabelStore

MAX_PAGE = 200
DEFAULT_PAGE = 50
MAX_WINDOW = 200
DEFAULT_WINDOW = 50
_CURSOR_VERSION = 2
PINNED, REST = "pinned", "rest"  # the two parts of a listing with the caller's pins first


def encode_cursor(project: str | None, trigger: str | None, part: str = REST) -> str:
    """A cursor after (project, trigger) in ``part`` (None, None: at the start of the rest)."""
    raw = json.dumps([_CURSOR_VERSION, part, project, trigger], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, tuple[str, str] | None]:
    """The part a cursor is in and the (project, trigger) key it is after (None: the start)."""
    bad = InvalidInput("cursor", "is not a cursor this API gave out (send next_cursor as it came)")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        version, part, project, trigger = json.loads(raw)
    except (ValueError, TypeError, binascii.Error):
        raise bad from None
    if version != _CURSOR_VERSION or part not in (PINNED, REST):
        raise bad
    if project is None and trigger is None and part == REST:
        return part, None
    if not isinstance(project, str) or not isinstance(trigger, str):
        raise bad
    try:
        return part, (project_id(project), entity_id(trigger, "trigger"))
    except InvalidInput:
        raise bad from None


def _last_run(last: LastRun | None) -> LastRunView | None:
    if last is None:
        return None
    requested = last.trigger_type in (TRIGGER_TYPE_MANUAL, TRIGGER_TYPE_BACKFILL)
    return LastRunView(
        id=last.id, status=last.status, trigger_type=last.trigger_type,
        scheduled_for=instant(last.scheduled_for_ms), scheduled_for_ms=last.scheduled_for_ms,
        created_at=instant(last.created_at_ms), created_at_ms=last.created_at_ms,
        started_at=rfc3339(last.started_at_ms), finished_at=rfc3339(last.finished_at_ms),
        admission_lag_ms=None if requested else last.created_at_ms - last.scheduled_for_ms)


def _window(window: RunWindow) -> RunWindowView:
    counts: dict[str, int | None] = {"successes": window.successes, "failures": window.failures,
                                     "cancelled": window.cancelled}
    return RunWindowView(runs=window.runs, successes=window.successes,
                         failures=window.failures, cancelled=window.cancelled,
                         skipped=window.skipped, success_rate=success_rate(counts),
                         max_lag_ms=window.max_lag_ms)


def summary_view(row: TriggerSummaryRow, now_ms: int) -> TriggerSummaryView:
    head = row.head
    spec = head.revision.spec
    upcoming = trigger_upcoming(head, now_ms=now_ms, count=1)
    due = jittered(head.revision, upcoming)
    return TriggerSummaryView(
        project=head.revision.project_id, trigger=head.revision.trigger_id,
        task=head.revision.task_id, kind=spec.kind, schedule=spec.expression,
        timezone=spec.timezone, enabled=head.revision.enabled,
        state="done" if trigger_done(head) else head.state_at(now_ms),
        pause=pause_view(head, now_ms),
        next_fire_at=rfc3339(upcoming[0]) if upcoming else None,
        next_fire_at_ms=upcoming[0] if upcoming else None,
        next_due_at_ms=due[0] if due else None,
        last_run=_last_run(row.last), window=_window(row.window))


class TriggerSummaries:
    def __init__(self, store: DashboardStore, clock: Clock,
                 labels: LabelStore | None = None) -> None:
        self._store = store
        self._clock = clock
        self._labels = labels

    def page(self, project: str | None = None, *, cursor: str | None = None,
             limit: int = DEFAULT_PAGE, window: int = DEFAULT_WINDOW,
             visible: Collection[str] | None = None, label: str | None = None,
             pins_first: Collection[tuple[str, str]] | None = None) -> TriggerSummaryPageView:
        """One page of ``limit`` triggers (of ``project``, or of every project; of the
        projects in ``visible`` only, when given: the ones the caller may read) after
        ``cursor``, each summarized over its latest ``window`` Runs; only the triggers
        labelled ``label`` when it is given. With ``pins_first`` (the caller's pinned
        (project, trigger) pairs), those come first, on as many pages as they fill, then
        the rest; each part in (project, trigger) order. Each carries its labels (one more
        statement)."""
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput("limit", f"must be between 1 and {MAX_PAGE}")
        if not 1 <= window <= MAX_WINDOW:
            raise InvalidInput("window", f"must be between 1 and {MAX_WINDOW}")
        pins = tuple(sorted(set(pins_first))) if pins_first else None
        part, after = (PINNED if pins else REST, None) if cursor is None \
            else decode_cursor(cursor)
        if part == PINNED and pins_first is None:
            raise InvalidInput("cursor", "was given out for pins_first=true")
        if part == PINNED and not pins:
            part, after = REST, None  # the pins are gone meanwhile: the rest from its start

        def read(n: int, after: tuple[str, str] | None, *,
                 only: tuple[tuple[str, str], ...] | None = None) -> list[TriggerSummaryRow]:
            return self._store.trigger_summary_page(TriggerSummaryParams(
                project_id=project, after=after, limit=n, window=window,
                projects=None if visible is None else tuple(sorted(visible)),
                label=label_filter(label), only=only, skip=None if only else pins))

        shown: list[TriggerSummaryRow] = []
        next_cursor = None
        if part == PINNED:
            shown = read(limit + 1, after, only=pins)
            if len(shown) > limit:  # more pins than the page holds: the rest of them next
                shown = shown[:limit]
                last = shown[-1].head.revision
                next_cursor = encode_cursor(last.project_id, last.trigger_id, PINNED)
            else:
                after = None  # the rest from its start, on what room the pins left
        if next_cursor is None:
            room = limit - len(shown)
            rest = read(room + 1, after)
            shown += rest[:room]
            if len(rest) > room:
                last = shown[-1].head.revision
                next_cursor = encode_cursor(last.project_id, last.trigger_id) if room \
                    else encode_cursor(None, None)
        now_ms = self._clock.now_ms()
        items = [summary_view(row, now_ms) for row in shown]
        if self._labels is not None and items:
            items = with_labels(items, self._labels.labels_of("trigger", project),
                                lambda v: (v.project, v.trigger))
        return TriggerSummaryPageView(
            items=items, window_runs=window,
            at=instant(now_ms), at_ms=now_ms, next_cursor=next_cursor)
