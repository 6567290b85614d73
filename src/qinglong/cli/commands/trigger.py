"""`ql trigger`: publish, disable, enable, list and preview cron triggers (when to run)."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from qinglong.cli.context import CLOCK, backend
from qinglong.cli.output import emit_json, emit_table, rfc3339, say
from qinglong.cli.params import database_url_option, json_option, project_option
from qinglong.domain.cron import CronSchedule, DstNote, Occurrence, normalize_expression
from qinglong.domain.model import TriggerView
from qinglong.domain.timezones import canonical_timezone, zone_info
from qinglong.domain.trigger import MisfirePolicy, TriggerRevision
from qinglong.errors import InvalidInput
from qinglong.storage.ports import TriggerPublishParams

MAX_PREVIEW = 1000


@click.group()
def trigger() -> None:
    """Triggers say when a task runs: a cron expression, an IANA time zone, a misfire policy."""


def _state(view: TriggerView) -> str:
    if not view.project_active:
        return "archived"
    if not view.revision.enabled:
        return "disabled"
    if not view.task_pin_current:
        return "stale-pin"
    return "firing"


def _upcoming(view: TriggerView, count: int) -> list[int]:
    if count <= 0 or _state(view) != "firing":
        return []
    schedule = view.revision.spec.schedule
    cursor = view.schedule.next_fire_at_ms if view.schedule else None
    first = cursor if cursor is not None else schedule.first_at_or_after(
        max(view.revision.created_at_ms, CLOCK.now_ms())
    )
    times = [first]
    while len(times) < count:
        times.append(schedule.next_after(times[-1]))
    return times


def trigger_json(revision: TriggerRevision) -> dict[str, object]:
    return {
        "project": revision.project_id,
        "trigger": revision.trigger_id,
        "revision": revision.revision,
        "task": revision.task_id,
        "task_revision": revision.task_revision,
        "task_content_digest": revision.task_content_digest,
        "cron": revision.spec.expression,
        "timezone": revision.spec.timezone,
        "misfire": revision.spec.misfire_policy.value,
        "enabled": revision.enabled,
        "content_digest": revision.content_digest,
        "published_at": rfc3339(revision.created_at_ms),
        "published_at_ms": revision.created_at_ms,
    }


def _publish(params: TriggerPublishParams, database_url: str, as_json: bool) -> None:
    project, trigger_id = params.project_id, params.trigger_id
    with backend(database_url) as store:
        result = store.definitions.trigger_publish(params)
    revision = result.revision
    if as_json:
        emit_json({**trigger_json(revision), "created": result.created})
    elif result.created:
        state = "enabled" if revision.enabled else "disabled"
        say(f"published trigger {project}/{trigger_id} revision {revision.revision} ({state}; "
            f"{revision.spec.expression} in {revision.spec.timezone}, misfire "
            f"{revision.spec.misfire_policy.value})")
    else:
        say(f"trigger {project}/{trigger_id} unchanged at revision {revision.revision}")


@trigger.command()
@project_option
@click.option("--trigger", "trigger_id", required=True, metavar="TRIGGER", help="Trigger id.")
@click.option("--task", "task_id", metavar="TASK", help="Task to run (required for a new trigger).")
@click.option("--cron", metavar="EXPR", help="5 fields, or 6 with seconds first: '*/5 * * * *'.")
@click.option("--timezone", metavar="ZONE", help="IANA time zone, e.g. UTC, Asia/Shanghai.")
@click.option(
    "--misfire", type=click.Choice([p.value for p in MisfirePolicy]),
    help="What a late scheduler does with a missed occurrence (default for new triggers: skip).",
)
@click.option("--disabled", is_flag=True, help="Publish the revision disabled.")
@database_url_option
@json_option
def publish(
    project: str, trigger_id: str, task_id: str | None, cron: str | None, timezone: str | None,
    misfire: str | None, disabled: bool, database_url: str, as_json: bool,
) -> None:
    """Publish a trigger revision; its schedule restarts from the publish time.

    For an existing trigger, options you leave out keep their current values.
    Publishing identical content is a no-op and keeps the schedule as it is.
    """
    if cron is not None:
        normalize_expression(cron)  # fail fast, before the database is opened
    if timezone is not None:
        canonical_timezone(timezone)
    _publish(
        TriggerPublishParams(
            project_id=project, trigger_id=trigger_id, task_id=task_id, expression=cron,
            timezone=timezone, misfire_policy=misfire, enabled=not disabled,
        ),
        database_url, as_json,
    )


@trigger.command()
@project_option
@click.option("--trigger", "trigger_id", required=True, metavar="TRIGGER", help="Trigger id.")
@database_url_option
@json_option
def disable(project: str, trigger_id: str, database_url: str, as_json: bool) -> None:
    """Stop a trigger: publishes a disabled revision (an occurrence in flight is fenced)."""
    _publish(
        TriggerPublishParams(project_id=project, trigger_id=trigger_id, enabled=False),
        database_url, as_json,
    )


@trigger.command()
@project_option
@click.option("--trigger", "trigger_id", required=True, metavar="TRIGGER", help="Trigger id.")
@database_url_option
@json_option
def enable(project: str, trigger_id: str, database_url: str, as_json: bool) -> None:
    """Start a disabled trigger again, pinned to its task's current revision."""
    _publish(
        TriggerPublishParams(project_id=project, trigger_id=trigger_id, enabled=True),
        database_url, as_json,
    )


@trigger.command("list")
@project_option
@click.option("--next", "next_count", type=click.IntRange(0, 100), default=1, show_default=True,
              help="How many upcoming fire times to show.")
@database_url_option
@json_option
def list_triggers(project: str, next_count: int, database_url: str, as_json: bool) -> None:
    """List triggers with their state and next fire times.

    STATE is firing, disabled, stale-pin (the task moved on and this trigger was not
    re-pinned) or archived (the project is archived).
    """
    with backend(database_url) as store:
        views = store.definitions.trigger_list(project)
    if as_json:
        emit_json([
            {
                **trigger_json(view.revision),
                "state": _state(view),
                "next_fire_at": [rfc3339(t) for t in _upcoming(view, next_count)],
                "next_fire_at_ms": _upcoming(view, next_count),
                "cursor_ms": view.schedule.next_fire_at_ms if view.schedule else None,
                "last_scheduled_at": rfc3339(view.schedule.last_scheduled_at_ms)
                if view.schedule else None,
            }
            for view in views
        ])
        return
    emit_table(
        [
            (
                view.revision.trigger_id,
                view.revision.revision,
                view.revision.task_id,
                view.revision.spec.expression,
                view.revision.spec.timezone,
                view.revision.spec.misfire_policy.value,
                _state(view),
                ", ".join(rfc3339(t) or "" for t in _upcoming(view, next_count)) or "-",
            )
            for view in views
        ],
        ["TRIGGER", "REV", "TASK", "CRON", "TIMEZONE", "MISFIRE", "STATE", "NEXT FIRE (UTC)"],
    )


def _note(occurrence: Occurrence, offset_changed: bool) -> str:
    notes = {
        DstNote.GAP_SHIFTED: f"DST gap: {occurrence.wall.time()} does not exist, fires at gap end",
        DstNote.OVERLAP_FIRST: "DST overlap: first of two identical wall times",
        DstNote.OVERLAP_SECOND: "DST overlap: second of two identical wall times",
    }
    text = notes.get(occurrence.note, "")
    if offset_changed and not text:
        text = "UTC offset changed since the previous occurrence"
    return text


@trigger.command()
@click.option("--cron", required=True, metavar="EXPR", help="Cron expression to preview.")
@click.option("--timezone", required=True, metavar="ZONE", help="IANA time zone.")
@click.option("--count", type=click.IntRange(1, MAX_PREVIEW), default=10, show_default=True)
@click.option("--after", metavar="TIME",
              help="Start after this RFC 3339 time, e.g. 2026-03-08T00:00:00Z (default: now).")
@json_option
def preview(cron: str, timezone: str, count: int, after: str | None, as_json: bool) -> None:
    """Show the next occurrences of an expression in a zone, marking DST transitions."""
    schedule = CronSchedule.parse(cron, timezone)
    if after is None:
        after_ms = CLOCK.now_ms()
    else:
        try:
            parsed = datetime.fromisoformat(after)
        except ValueError:
            raise InvalidInput("after", "must be an RFC 3339 time such as 2026-03-08T00:00:00Z") from None
        if parsed.tzinfo is None:
            raise InvalidInput("after", "needs a UTC offset or Z")
        after_ms = int(parsed.timestamp() * 1000)
    zone = zone_info(schedule.timezone)
    rows = []
    previous_offset = None
    for index, occurrence in enumerate(schedule.occurrences(after_ms, count), start=1):
        local = datetime.fromtimestamp(occurrence.at_ms / 1000, UTC).astimezone(zone)
        offset = local.utcoffset()
        changed = previous_offset is not None and offset != previous_offset
        previous_offset = offset
        rows.append({
            "n": index,
            "local": local.isoformat(),
            "utc": rfc3339(occurrence.at_ms),
            "at_ms": occurrence.at_ms,
            "dst": occurrence.note.value or None,
            "note": _note(occurrence, changed),
        })
    if as_json:
        emit_json({"cron": schedule.expression, "timezone": schedule.timezone, "occurrences": rows})
        return
    say(f"{schedule.expression} in {schedule.timezone}")
    emit_table([(r["n"], r["local"], r["utc"], r["note"]) for r in rows],
               ["#", "LOCAL TIME", "UTC", "NOTE"])
