"""`ql trigger`: publish, disable, enable, list and preview triggers (when to run): cron
expressions, fixed intervals (``--every``) and one-shot instants (``--at``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from qinglong.cli.commands.trigger_schedule import (
    ANCHOR_HELP,
    AT_HELP,
    EVERY_HELP,
    check_dst,
    check_jitter,
    dst_and_jitter_options,
    overlap_of,
    param_values,
    schedule_summary,
    schedule_text,
    seconds,
)
from qinglong.cli.context import CLOCK, catalog, respond
from qinglong.cli.output import emit_json, emit_table, rfc3339, say
from qinglong.cli.params import (
    WholeSecond,
    WholeSeconds,
    actor_option,
    database_url_option,
    json_option,
    pause_options,
    project_option,
)
from qinglong.cli.targets import add_delete_command, add_switch_commands
from qinglong.domain.cron import DstPolicy
from qinglong.domain.occurrences import instant_text
from qinglong.domain.timezones import UTC_NAME, canonical_timezone
from qinglong.domain.trigger import (
    DEFAULT_QUEUE_LIMIT,
    MAX_QUEUE_LIMIT,
    MisfirePolicy,
    OverlapPolicy,
)
from qinglong.errors import InvalidInput
from qinglong.service.params import (
    TriggerPauseParams,
    TriggerPublishParams,
    TriggerResumeParams,
)
from qinglong.service.preview import MAX_PREVIEW, schedule_preview
from qinglong.service.views.triggers import TriggerView


@click.group()
def trigger() -> None:
    """Triggers say when a task runs: a cron expression in an IANA time zone, every N seconds
    (--every), or once (--at); with a misfire and an overlap policy."""


def trigger_option(func: Any) -> Any:
    return click.option("--trigger", "trigger_id", required=True, metavar="TRIGGER",
                        help="Trigger id.")(func)


# Spec fields whose errors name the option that sets them (cli/main.py maps the older ones).
_OPTION_FIELDS = {"every": "--every", "anchor": "--anchor", "at": "--at", "dst": "--dst-gap",
                  "dst-gap": "--dst-gap", "dst-overlap": "--dst-overlap", "jitter": "--jitter",
                  "jitter-random": "--jitter-random"}


def _publish(params: TriggerPublishParams, database_url: str, as_json: bool) -> None:
    project, trigger_id = params.project_id, params.trigger_id
    try:
        with catalog(database_url) as cat:
            result = cat.trigger_publish(params)
    except InvalidInput as exc:
        option = _OPTION_FIELDS.get(exc.field)
        if option is None or type(exc).__init__ is not InvalidInput.__init__:
            raise
        raise type(exc)(option, exc.rule) from exc
    if as_json:
        emit_json(result)
        return
    restored = " (restored)" if result.restored else ""
    if result.created:
        state = "enabled" if result.enabled else "disabled"
        starts = f"; starts flow {result.flow}" if result.flow is not None else ""
        values = ", ".join(f"{k}={v}" for k, v in result.parameters.items())
        say(f"published trigger {project}/{trigger_id} revision {result.revision} ({state}; "
            f"{schedule_summary(result)} in {result.timezone}, misfire {result.misfire}"
            f"{starts}{'; values ' + values if values else ''}){restored}")
    elif result.restored:
        say(f"restored trigger {project}/{trigger_id} at revision {result.revision}")
    else:
        say(f"trigger {project}/{trigger_id} unchanged at revision {result.revision}")


@trigger.command()
@project_option
@trigger_option
@click.option("--task", "task_id", metavar="TASK",
              help="Task to run (required for a new trigger, unless --flow).")
@click.option("--flow", metavar="FLOW",
              help="A new trigger starts a run of this flow at each occurrence (its current "
                   "revision), instead of a Run of a task; it is filed under --task, one of the "
                   "flow's tasks (default: its first root's). What a trigger starts never "
                   "changes.")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="A value for a parameter of the task (or of the flow's tasks), given to "
                   "every Run the trigger admits; repeat for more. Replaces the trigger's "
                   "values; checked when published and when the task is republished.")
@click.option("--no-params", is_flag=True, help="Give no values (the tasks' defaults apply).")
@click.option("--cron", metavar="EXPR", help="5 fields, or 6 with seconds first: '*/5 * * * *'.")
@click.option("--every", "every_s", type=WholeSeconds(), metavar="DURATION", help=EVERY_HELP)
@click.option("--anchor", "anchor_ms", type=WholeSecond(CLOCK.now_ms), metavar="TIME",
              help=ANCHOR_HELP)
@click.option("--at", "at_ms", type=WholeSecond(CLOCK.now_ms), metavar="TIME", help=AT_HELP)
@click.option("--timezone", metavar="ZONE",
              help="IANA time zone, e.g. UTC, Asia/Shanghai: required with --cron; for --every "
                   "and --at only how times are shown (default UTC).")
@dst_and_jitter_options
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
    project: str, trigger_id: str, task_id: str | None, cron: str | None, every_s: int | None,
    anchor_ms: int | None, at_ms: int | None, timezone: str | None, dst_gap: str | None,
    dst_overlap: str | None, jitter_s: int | None, jitter_random_s: int | None,
    misfire: str | None, overlap: str | None, overlap_queue_limit: int | None, disabled: bool,
    database_url: str, as_json: bool, flow: str | None = None, params: tuple[str, ...] = (),
    no_params: bool = False,
) -> None:
    """Publish a trigger revision; its schedule restarts from the publish time.

    The schedule is one of --cron (with --timezone, and a DST policy: --dst-gap,
    --dst-overlap), --every (with --anchor) or --at. For an existing trigger, options you
    leave out keep their current values (and it stays enabled or disabled as it was).
    Publishing identical content is a no-op and keeps the schedule as it is. Publishing a
    deleted trigger restores it, enabled unless --disabled is given.

    A new trigger published with --flow starts a run of that flow at each occurrence instead
    of a Run of a task; --param gives values to the Runs (or flow runs) it admits
    (docs/controls/flows.md, docs/controls/parameters.md).
    """
    expression = schedule_text(cron, every_s, anchor_ms, at_ms)
    if at_ms is not None and not disabled and at_ms < (now_ms := CLOCK.now_ms()):
        raise click.BadParameter(
            f"{instant_text(at_ms)} is in the past (it is now {instant_text(now_ms)}): a one-shot "
            "trigger fires only at an instant after it is published", param_hint="'--at'")
    if timezone is not None:
        canonical_timezone(timezone)
    check_dst(expression, dst_gap, dst_overlap)
    check_jitter(jitter_s, jitter_random_s)
    _publish(
        TriggerPublishParams(
            project_id=project, trigger_id=trigger_id, task_id=task_id, expression=expression,
            timezone=timezone, misfire_policy=misfire, enabled=False if disabled else None,
            overlap=overlap_of(overlap, overlap_queue_limit), dst_gap=dst_gap,
            dst_overlap=dst_overlap, jitter_s=jitter_s, jitter_random_s=jitter_random_s,
            flow=flow, parameters=param_values(params, no_params),
        ),
        database_url, as_json,
    )


def _switch(project: str, trigger_id: str, enabled: bool, database_url: str,
            as_json: bool) -> None:
    """Publish the trigger with only its state changed."""
    _publish(TriggerPublishParams(project_id=project, trigger_id=trigger_id, enabled=enabled),
             database_url, as_json)


add_switch_commands(
    trigger, "trigger", _switch,
    enable_help="Start a disabled trigger again, pinned to its task's current revision.",
    disable_help="Stop a trigger: publishes a disabled revision (an occurrence in flight is "
                 "fenced).")


add_delete_command(
    trigger, "trigger",
    "Delete a trigger: it stops (an occurrence in flight is fenced) and leaves the lists.\n\n"
    "Its revisions stay, for the Runs and the audit that refer to them; publishing it again "
    "restores it.")


@trigger.command()
@project_option
@trigger_option
@pause_options("Resume by itself at this time: RFC 3339 (2026-12-24T08:00:00+08:00), epoch "
               "milliseconds, or a duration from now (2h, 1d). Default: until resumed.",
               "Why, kept with the pause and shown in lists.")
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
    params = TriggerPauseParams(project_id=project, trigger_id=trigger_id, until_ms=until_ms,
                                reason=reason, actor=actor)

    def text(view: TriggerView) -> None:
        held = view.pause
        assert held is not None
        until = f"until {held.until}" if held.until else "until resumed"
        say(f"paused trigger {project}/{trigger_id} since {held.since} {until}")

    respond(catalog(database_url), lambda cat: cat.trigger_pause(params), as_json, text)


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
    params = TriggerResumeParams(project_id=project, trigger_id=trigger_id, actor=actor)

    def text(view: TriggerView) -> None:
        upcoming = view.next_fire_at
        nxt = f"; next fire {upcoming[0]}" if upcoming else ""
        say(f"resumed trigger {project}/{trigger_id}{nxt}")

    respond(catalog(database_url), lambda cat: cat.trigger_resume(params), as_json, text)


@trigger.command("list")
@click.option("--project", "project", metavar="PROJECT", help="Only this project (default: all).")
@click.option("--next", "next_count", type=click.IntRange(0, 100), default=1, show_default=True,
              help="How many upcoming fire times to show.")
@click.option("--all", "include_deleted", is_flag=True, help="Include deleted triggers.")
@click.option("--label", metavar="LABEL", help="Only the triggers with this label.")
@database_url_option
@json_option
def list_triggers(project: str | None, next_count: int, include_deleted: bool,
                  label: str | None, database_url: str, as_json: bool) -> None:
    """List triggers with their state and next fire times.

    STATE is firing, paused (with when it ends, and why), done (a one-shot trigger after its
    instant: nothing is left to fire), disabled, stale-pin (the task moved on and this
    trigger was not re-pinned), archived (the project is archived) or deleted.
    NEXT FIRE is in the trigger's own time zone, with UTC after it, and for a trigger with
    jitter how long after it the occurrence runs (+4m12s).
    """
    respond(catalog(database_url),
            lambda cat: cat.trigger_list(project, next_count=next_count,
                                         include_deleted=include_deleted, label=label),
            as_json, _trigger_table)


def _trigger_table(views: list[TriggerView]) -> None:
    emit_table(
        [
            (
                f"{view.project}/{view.trigger}",
                view.revision,
                view.task if view.flow is None else f"flow {view.flow}",
                schedule_summary(view),
                view.timezone,
                view.misfire,
                _state_text(view),
                _next_fires(view) or "-",
            )
            for view in views
        ],
        ["TRIGGER", "REV", "TASK", "SCHEDULE", "TIMEZONE", "MISFIRE", "STATE", "NEXT FIRE"],
    )


def _state_text(view: TriggerView) -> str:
    held = view.pause
    if held is None:
        return view.state
    text = f"paused until {held.until}" if held.until else "paused"
    return f"{text} ({held.reason})" if held.reason else text


def _next_fires(view: TriggerView) -> str:
    fires = zip(view.next_fire_local, view.next_fire_at, view.next_fire_at_ms,
                view.next_due_at_ms, strict=True)
    return ", ".join(_fire_text(local, utc) + _jitter_text(nominal, due)
                     for local, utc, nominal, due in fires)


def _jitter_text(nominal_ms: int, due_ms: int) -> str:
    """`` +4m12s``: how long after its nominal time a jittered occurrence runs."""
    return f" +{seconds((due_ms - nominal_ms) // 1000)}" if due_ms != nominal_ms else ""


def _fire_text(local: str, utc: str) -> str:
    """``2026-12-01 08:00:00+08:00 (00:00:00Z)``; just the UTC time for a UTC trigger."""
    wall = local.replace("T", " ")
    if local.endswith("+00:00"):
        return utc.replace("T", " ").replace(".000Z", "Z")
    return f"{wall} ({utc[11:19]}Z)"


@trigger.command()
@click.option("--cron", metavar="EXPR", help="Cron expression to preview.")
@click.option("--every", "every_s", type=WholeSeconds(), metavar="DURATION", help=EVERY_HELP)
@click.option("--anchor", "anchor_ms", type=WholeSecond(CLOCK.now_ms), metavar="TIME",
              help="With --every: the instant the intervals count from (default: --after, "
                   "rounded up to a whole second, as a publish at that time would).")
@click.option("--at", "at_ms", type=WholeSecond(CLOCK.now_ms), metavar="TIME", help=AT_HELP)
@click.option("--timezone", metavar="ZONE",
              help="IANA time zone (required with --cron; default UTC for --every and --at).")
@dst_and_jitter_options
@click.option("--project", "project", metavar="PROJECT",
              help="With --jitter: the project of the trigger (its offset is a hash of both).")
@click.option("--trigger", "trigger_id", metavar="TRIGGER",
              help="With --jitter: the trigger's id.")
@click.option("--count", type=click.IntRange(1, MAX_PREVIEW), default=10, show_default=True)
@click.option("--after", metavar="TIME",
              help="Start after this RFC 3339 time, e.g. 2026-03-08T00:00:00Z (default: now).")
@json_option
def preview(cron: str | None, every_s: int | None, anchor_ms: int | None, at_ms: int | None,
            timezone: str | None, dst_gap: str | None, dst_overlap: str | None,
            jitter_s: int | None, jitter_random_s: int | None, project: str | None,
            trigger_id: str | None, count: int, after: str | None, as_json: bool) -> None:
    """Show the next occurrences of a schedule (--cron, --every or --at), marking DST
    transitions, what the DST policy (--dst-gap, --dst-overlap) does at them, and changes of
    the UTC offset."""
    text = schedule_text(cron, every_s, anchor_ms, at_ms)
    if text is None:
        raise click.UsageError("give a schedule: --cron EXPR, --every DURATION or --at TIME")
    if timezone is None and cron is not None:
        raise click.UsageError("--cron needs --timezone (an IANA name such as UTC)")
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
    check_dst(text, dst_gap, dst_overlap)
    if jitter_random_s is not None and jitter_s is None:
        raise click.UsageError("--jitter-random is a part of --jitter (give both)")
    jitter = check_jitter(jitter_s, jitter_random_s)
    if jitter is not None and (project is None or trigger_id is None):
        raise click.UsageError("--jitter needs --project and --trigger: a trigger's offset is a "
                               "hash of its project and id")
    dst = DstPolicy.parse(dst_gap, dst_overlap) if dst_gap or dst_overlap else None
    view = schedule_preview(text, timezone or UTC_NAME, count=count, after_ms=after_ms, dst=dst,
                            jitter=jitter, project_id=project, trigger_id=trigger_id)
    if as_json:
        emit_json(view)
        return
    policy = DstPolicy.parse(view.dst.gap, view.dst.overlap) if view.dst is not None else None
    shown = f" (DST {policy.describe()})" if policy is not None and not policy.default else ""
    if jitter is not None and view.jitter is not None:
        shown += (f" ({jitter.describe()}; {project}/{trigger_id}'s stable offset "
                  f"{view.jitter.stable_s}s)")
    say(f"{view.schedule} in {view.timezone}{shown}")
    rows = view.occurrences
    if not rows:
        say(f"no occurrence after {rfc3339(after_ms)}")
        return
    if view.jitter is not None:
        emit_table([(r.n, r.local, r.utc, f"{r.jittered_utc} (+{r.jitter_s}s)", r.note)
                    for r in rows], ["#", "LOCAL TIME", "UTC", "RUNS AT (JITTERED, UTC)", "NOTE"])
        return
    emit_table([(r.n, r.local, r.utc, r.note) for r in rows], ["#", "LOCAL TIME", "UTC", "NOTE"])
