"""A schedule preview as the surfaces ask for it: the next occurrences of a cron expression,
``every DURATION [from TIME]`` or ``at TIME`` in a zone, with daylight saving time marked
(`ql trigger preview --json` has the same shape)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from qinglong.domain.cron import CronSchedule, DstNote, DstPolicy, Occurrence
from qinglong.domain.jitter import Jitter
from qinglong.domain.timezones import zone_info
from qinglong.domain.trigger import parse_schedule, text_kind
from qinglong.errors import InvalidInput
from qinglong.service.views.base import instant
from qinglong.service.views.reports import PreviewOccurrence, PreviewView
from qinglong.service.views.triggers import DstView, JitterView

MAX_PREVIEW = 1000

_NOTES = {
    DstNote.OVERLAP_FIRST: "DST overlap: first of two identical wall times",
    DstNote.OVERLAP_SECOND: "DST overlap: second of two identical wall times",
}


def note_text(occurrence: Occurrence, offset_changed: bool) -> str:
    """What people should know about an occurrence: a DST gap shifted or skipped, an
    overlap's first or second wall time, or a changed UTC offset."""
    if occurrence.note is DstNote.GAP_SHIFTED:
        text = f"DST gap: {occurrence.wall.time()} does not exist, fires at gap end"
    else:
        text = _NOTES.get(occurrence.note, "")
    if occurrence.skipped:
        gone = ", ".join(f"{wall:%Y-%m-%d %H:%M:%S}" for wall in occurrence.skipped)
        skipped = f"DST gap: {gone} does not exist, skipped (gap skip)"
        text = f"{skipped}; {text}" if text else skipped
    if offset_changed and not text:
        text = "UTC offset changed since the previous occurrence"
    return text


def schedule_preview(text: str, timezone: str, *, count: int, after_ms: int,
                     dst: DstPolicy | None = None, jitter: Jitter | None = None,
                     project_id: str | None = None, trigger_id: str | None = None) -> PreviewView:
    """The next ``count`` occurrences after ``after_ms`` (an interval without ``from`` is
    anchored there) under the DST policy ``dst``; each with its local and UTC time, its DST
    mark (gap-shifted, overlap-first, overlap-second), the wall times a gap skipped and a
    note for people. With a ``jitter`` (whose stable offset is a hash of ``project_id`` and
    ``trigger_id``), also when each becomes due."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PREVIEW:
        raise InvalidInput("count", f"must be between 1 and {MAX_PREVIEW}")
    if jitter is not None and (project_id is None or trigger_id is None):
        raise InvalidInput("jitter", "needs the project and the trigger: a trigger's offset is "
                                     "a hash of its project and id")
    kind = text_kind(text)
    schedule = parse_schedule(text, timezone, default_anchor_ms=after_ms, dst=dst)
    zone = zone_info(schedule.timezone)
    due_of = (jitter.delay(schedule, project_id, trigger_id).due
              if jitter is not None and project_id is not None and trigger_id is not None
              else None)
    rows: list[PreviewOccurrence] = []
    previous_offset = None
    for index, occurrence in enumerate(schedule.occurrences(after_ms, count), start=1):
        local = datetime.fromtimestamp(occurrence.at_ms / 1000, UTC).astimezone(zone)
        offset = local.utcoffset()
        changed = previous_offset is not None and offset != previous_offset
        previous_offset = offset
        jittered: dict[str, Any] = {}
        if due_of is not None:
            due = due_of(occurrence.at_ms)
            jittered = {"jittered_utc": instant(due), "jittered_at_ms": due,
                        "jitter_s": (due - occurrence.at_ms) // 1000}
        rows.append(PreviewOccurrence(
            n=index, local=local.isoformat(), utc=instant(occurrence.at_ms),
            at_ms=occurrence.at_ms, dst=occurrence.note.value or None,
            skipped=[wall.isoformat() for wall in occurrence.skipped],
            note=note_text(occurrence, changed), **jittered))
    policy = schedule.dst if isinstance(schedule, CronSchedule) else None
    return PreviewView(
        kind=kind, schedule=schedule.expression,
        cron=schedule.expression if kind == "cron" else None, timezone=schedule.timezone,
        dst=None if policy is None else DstView(gap=policy.gap.value, overlap=policy.overlap.value),
        jitter=None if jitter is None or project_id is None or trigger_id is None else JitterView(
            max_s=jitter.max_s, random_s=jitter.random_s,
            stable_s=jitter.stable_s(project_id, trigger_id)),
        occurrences=rows)
