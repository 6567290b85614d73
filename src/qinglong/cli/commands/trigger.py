"""`ql trigger`: publish, disable, enable, list and preview cron triggers (when to run)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from qinglong.cli.context import CLOCK, catalog
from qinglong.cli.output import emit_json, emit_table, rfc3339, say
from qinglong.cli.params import (
    Instant,
    actor_option,
    database_url_option,
    json_option,
    project_option,
)
from qinglong.domain.cron import CronSchedule, DstNote, Occurrence, normalize_expression
from qinglong.domain.timezones import canonical_timezone, zone_info
from qinglong.domain.trigger import (
    DEFAULT_QUEUE_LIMIT,
    MAX_QUEUE_LIMIT,
    MisfirePolicy,
    Overlap,
    OverlapPolicy,
)
from qinglong.errors import InvalidInput
from qinglong.storage.ports import TriggerPauseParams, TriggerPublishParams, TriggerResumeParams

MAX_PREVIEW = 1000


@click.group()
def trigger() -> None:
    """Triggers say when a task runs: a cron expression, an IANA time zone, a misfire policy."""


def trigger_option(func: Any) -> Any:
    return click.option("--trigger", "trigger_id", required=True, metavar="TRIGGER",
                        help="Trigger id.")(func)


def _publish(params: TriggerPublishParams, database_url: str, as_json: bool) -> None:
    project, trigger_id = params.project_id, params.trigger_id
    with catalog(database_url) as cat:
        result = cat.trigger_publish(params)
    if as_json:
        emit_json(result)
        return
    restored = " (restored)" if result["restored"] else ""
    if result["created"]:
        state = "enabled" if result["enabled"] else "disabled"
        say(f"published trigger {project}/{trigger_id} revision {result['revision']} ({state}; "
            f"{result['cron']} in {result['timezone']}, misfire {result['misfire']}){restored}")
    elif result["restored"]:
        say(f"restored trigger {project}/{trigger_id} at revision {result['revision']}")
    else:
        say(f"trigger {project}/{trigger_id} unchanged at revision {result['revision']}")


@trigger.command()
@project_option
@trigger_option
@click.option("--task", "task_id", metavar="TASK", help="Task to run (required for a new trigger).")
@click.option("--cron", metavar="EXPR", help="5 fields, or 6 with seconds first: '*/5 * * * *'.")
@click.option("--timezone", metavar="ZONE", help="IANA time zone, e.g. UTC, Asia/Shanghai.")
@click.option(
    "--misfire", type=click.Choice([p.value for p in MisfirePolicy]),
    help="What a late scheduler does with a missed occurrence (default for new triggers: skip).",
)
@click.option(
    "--overlap", type=click.Choice([p.value for p in OverlapPolicy]),
    help="When an occurrence comes while the previous Run is still active: allow (run both), "
         "skip (end the new Run `cancelled`, reason policy), queue (it waits its turn, at most "
         "--overlap-queue-limit waiting), cancel_previous (stop the old one). Default: allow.",
)
@click.option("--overlap-queue-limit", type=click.IntRange(0, MAX_QUEUE_LIMIT), metavar="N",
              help=f"With --overlap queue: Runs allowed to wait (default {DEFAULT_QUEUE_LIMIT}); "
                   "beyond it a new Run is skipped.")
@click.option("--disabled", is_flag=True,
              help="Publish the revision disabled (otherwise an existing trigger keeps its "
                   "state, and a new or deleted one is enabled).")
@database_url_option
@json_option
def publish(
    project: str, trigger_id: str, task_id: str | None, cron: str | None, timezone: str | None,
    misfire: str | None, overlap: str | None, overlap_queue_limit: int | None, disabled: bool,
    database_url: str, as_json: bool,
) -> None:
    """Publish a trigger revision; its schedule restarts from the publish time.

    For an existing trigger, options you leave out keep their current values (and it stays
    enabled or disabled as it was). Publishing identical content is a no-op and keeps the
    schedule as it is. Publishing a deleted trigger restores it, enabled unless --disabled
    is given.
    """
    if cron is not None:
        normalize_expression(cron)  # fail fast, before the database is opened
    if timezone is not None:
        canonical_timezone(timezone)
    _publish(
        TriggerPublishParams(
            project_id=project, trigger_id=trigger_id, task_id=task_id, expression=cron,
            timezone=timezone, misfire_policy=misfire, enabled=False if disabled else None,
            overlap=_overlap(overlap, overlap_queue_limit),
        ),
        database_url, as_json,
    )


def _overlap(policy: str | None, queue_limit: int | None) -> Overlap | None:
    if policy is None:
        if queue_limit is not None:
            raise InvalidInput("overlap-queue-limit", "give it with --overlap queue")
        return None  # keep the current policy
    return Overlap(policy=OverlapPolicy(policy),
                   queue_limit=DEFAULT_QUEUE_LIMIT if queue_limit is None else queue_limit)


@trigger.command()
@project_option
@trigger_option
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
@trigger_option
@database_url_option
@json_option
def enable(project: str, trigger_id: str, database_url: str, as_json: bool) -> None:
    """Start a disabled trigger again, pinned to its task's current revision."""
    _publish(
        TriggerPublishParams(project_id=project, trigger_id=trigger_id, enabled=True),
        database_url, as_json,
    )


@trigger.command()
@project_option
@trigger_option
@database_url_option
@json_option
def delete(project: str, trigger_id: str, database_url: str, as_json: bool) -> None:
    """Delete a trigger: it stops (an occurrence in flight is fenced) and leaves the lists.

    Its revisions stay, for the Runs and the audit that refer to them; publishing it again
    restores it."""
    with catalog(database_url) as cat:
        view = cat.trigger_delete(project, trigger_id)
    if as_json:
        emit_json(view)
    else:
        say(f"deleted trigger {project}/{trigger_id}")


@trigger.command()
@project_option
@trigger_option
@click.option("--until", "until_ms", type=Instant(ahead=True, now_ms=CLOCK.now_ms), metavar="TIME",
              help="Resume by itself at this time: RFC 3339 (2026-12-24T08:00:00+08:00), epoch "
                   "milliseconds, or a duration from now (2h, 1d). Default: until resumed.")
@click.option("--reason", metavar="TEXT", help="Why, kept with the pause and shown in lists.")
@actor_option
@database_url_option
@json_option
def pause(project: str, trigger_id: str, until_ms: int | None, reason: str | None, actor: str,
          database_url: str, as_json: bool) -> None:
    """Pause a trigger from now, until resumed or until --until.

    Occurrences that fall in the pause are not run; they are recorded with the fate `paused`
    (the audit and the ledger show them). When the pause ends, the occurrence in progress
    (the last one at or before the resume) is decided by the misfire policy as if there had
    been no pause: run if still within the grace, else skipped or fired once. Pausing a paused
    trigger again changes when the pause ends and why. A decision in flight is fenced out.
    """
    with catalog(database_url) as cat:
        view = cat.trigger_pause(TriggerPauseParams(
            project_id=project, trigger_id=trigger_id, until_ms=until_ms, reason=reason,
            actor=actor))
    if as_json:
        emit_json(view)
        return
    held = view["pause"]
    assert isinstance(held, dict)
    until = f"until {held['until']}" if held["until"] else "until resumed"
    say(f"paused trigger {project}/{trigger_id} since {held['since']} {until}")


@trigger.command()
@project_option
@trigger_option
@actor_option
@database_url_option
@json_option
def resume(project: str, trigger_id: str, actor: str, database_url: str, as_json: bool) -> None:
    """End a trigger's pause now.

    The occurrence in progress (the last one at or before now) follows the misfire policy;
    the ones before it stay `paused`. Refused when the trigger is not paused."""
    with catalog(database_url) as cat:
        view = cat.trigger_resume(TriggerResumeParams(project_id=project, trigger_id=trigger_id,
                                                      actor=actor))
    if as_json:
        emit_json(view)
        return
    upcoming = view["next_fire_at"]
    nxt = f"; next fire {upcoming[0]}" if isinstance(upcoming, list) and upcoming else ""
    say(f"resumed trigger {project}/{trigger_id}{nxt}")


@trigger.command("list")
@click.option("--project", "project", metavar="PROJECT", help="Only this project (default: all).")
@click.option("--next", "next_count", type=click.IntRange(0, 100), default=1, show_default=True,
              help="How many upcoming fire times to show.")
@click.option("--all", "include_deleted", is_flag=True, help="Include deleted triggers.")
@database_url_option
@json_option
def list_triggers(project: str | None, next_count: int, include_deleted: bool, database_url: str,
                  as_json: bool) -> None:
    """List triggers with their state and next fire times.

    STATE is firing, paused (with when it ends, and why), disabled, stale-pin (the task moved
    on and this trigger was not re-pinned), archived (the project is archived) or deleted.
    NEXT FIRE is in the trigger's own time zone, with UTC after it.
    """
    with catalog(database_url) as cat:
        views = cat.trigger_list(project, next_count=next_count, include_deleted=include_deleted)
    if as_json:
        emit_json(views)
        return
    emit_table(
        [
            (
                f"{view['project']}/{view['trigger']}",
                view["revision"],
                view["task"],
                view["cron"],
                view["timezone"],
                view["misfire"],
                _state_text(view),
                ", ".join(_fire_text(local, utc) for local, utc in zip(
                    view["next_fire_local"], view["next_fire_at"], strict=True))  # type: ignore[call-overload]
                or "-",
            )
            for view in views
        ],
        ["TRIGGER", "REV", "TASK", "CRON", "TIMEZONE", "MISFIRE", "STATE", "NEXT FIRE"],
    )


def _state_text(view: dict[str, Any]) -> str:
    held = view.get("pause")
    if not held:
        return str(view["state"])
    text = f"paused until {held['until']}" if held["until"] else "paused"
    return f"{text} ({held['reason']})" if held["reason"] else text


def _fire_text(local: str, utc: str) -> str:
    """``2026-12-01 08:00:00+08:00 (00:00:00Z)``; just the UTC time for a UTC trigger."""
    wall = local.replace("T", " ")
    if local.endswith("+00:00"):
        return utc.replace("T", " ").replace(".000Z", "Z")
    return f"{wall} ({utc[11:19]}Z)"


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
