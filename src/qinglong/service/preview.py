"""A schedule preview as the surfaces ask for it: the next occurrences of a cron expression,
``every DURATION [from TIME]`` or ``at TIME`` in a zone, with daylight saving time marked
(`ql trigger preview --json` has the same shape)."""

from __future__ import annotations

from datetime import UTC, datetime

from qinglong.domain.cron import DstNote, Occurrence
from qinglong.domain.timezones import zone_info
from qinglong.domain.trigger import parse_schedule, text_kind
from qinglong.errors import InvalidInput
from qinglong.service.views.base import instant
from qinglong.service.views.reports import PreviewOccurrence, PreviewView

MAX_PREVIEW = 1000

_NOTES = {
    DstNote.OVERLAP_FIRST: "DST overlap: first of two identical wall times",
    DstNote.OVERLAP_SECOND: "DST overlap: second of two identical wall times",
}


def note_text(occurrence: Occurrence, offset_changed: bool) -> str:
    if occurrence.note is DstNote.GAP_SHIFTED:
        return f"DST gap: {occurrence.wall.time()} does not exist, fires at gap end"
    text = _NOTES.get(occurrence.note, "")
    if offset_changed and not text:
        text = "UTC offset changed since the previous occurrence"
    return text


def schedule_preview(text: str, timezone: str, *, count: int, after_ms: int) -> PreviewView:
    """The next ``count`` occurrences after ``after_ms`` (an interval without ``from`` is
    anchored there); each with its local and UTC time, its DST mark (gap-shifted,
    overlap-first, overlap-second) and a note for people."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PREVIEW:
        raise InvalidInput("count", f"must be between 1 and {MAX_PREVIEW}")
    kind = text_kind(text)
    schedule = parse_schedule(text, timezone, default_anchor_ms=after_ms)
    zone = zone_info(schedule.timezone)
    rows: list[PreviewOccurrence] = []
    previous_offset = None
    for index, occurrence in enumerate(schedule.occurrences(after_ms, count), start=1):
        local = datetime.fromtimestamp(occurrence.at_ms / 1000, UTC).astimezone(zone)
        offset = local.utcoffset()
        changed = previous_offset is not None and offset != previous_offset
        previous_offset = offset
        rows.append(PreviewOccurrence(
            n=index, local=local.isoformat(), utc=instant(occurrence.at_ms),
            at_ms=occurrence.at_ms, dst=occurrence.note.value or None,
            note=note_text(occurrence, changed)))
    return PreviewView(kind=kind, schedule=schedule.expression,
                       cron=schedule.expression if kind == "cron" else None,
                       timezone=schedule.timezone, occurrences=rows)
