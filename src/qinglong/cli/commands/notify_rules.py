"""`ql notify rule`: which events of a project (or of one of its tasks) a channel is told
about, and how long the events sent after a delay wait (docs/controls/notifications.md)."""

from __future__ import annotations

import click

from qinglong.cli.commands.notify import _notifications, notify
from qinglong.cli.commands.notify_targets import FIELDS
from qinglong.cli.output import emit_json, emit_table, say, when
from qinglong.cli.params import DURATION, database_url_option, json_option
from qinglong.domain.notify.events import (
    DEFAULT_EVENTS,
    DELAYED,
    UNPLACEABLE_AFTER_RANGE,
    RuleEvent,
    delay_text,
    events_text,
    known_events,
    parse_events,
)
from qinglong.service.notifications import naming
from qinglong.service.views.notify import RuleRemovedView, rule_view

# A delay's field in the notification model as the option that sets it.
DELAY_OPTIONS = {"unplaceable_after": "--unplaceable-after",
                 "running_long_after": "--running-long-after",
                 "late_start_after": "--late-start-after"}


@notify.group()
def rule() -> None:
    """Which events of a project (or of one of its tasks) a channel is told about."""


_events_help = (f"Comma-separated: {known_events()}, or all (default "
                f"{','.join(e.value for e in DEFAULT_EVENTS)}).")


def _after_help(event: RuleEvent, what: str) -> str:
    return (f"{what} ({UNPLACEABLE_AFTER_RANGE}; default {delay_text(DELAYED[event])} for a "
            f"new rule, unchanged for one that asked for {event.value} already).")


@rule.command("add")
@click.option("--channel", "channel_name", required=True, metavar="CHANNEL")
@click.option("--project", required=True, metavar="PROJECT")
@click.option("--task", "task_id", metavar="TASK", help="Only this task (default: every task).")
@click.option("--events", multiple=True, metavar="LIST", help=_events_help)
@click.option("--unplaceable-after", "unplaceable_after", type=DURATION, metavar="DURATION",
              help=_after_help(RuleEvent.UNPLACEABLE, "How long a queued Run no live worker "
                                                      "can take waits before unplaceable is "
                                                      "sent"))
@click.option("--running-long-after", "running_long_after", type=DURATION, metavar="DURATION",
              help=_after_help(RuleEvent.RUNNING_LONG, "How long a Run's attempt runs before "
                                                       "running_long is sent"))
@click.option("--late-start-after", "late_start_after", type=DURATION, metavar="DURATION",
              help=_after_help(RuleEvent.LATE_START, "How long after its scheduled time a Run "
                                                     "not started is reported late_start"))
@database_url_option
@json_option
def rule_add(channel_name: str, project: str, task_id: str | None, events: tuple[str, ...],
             unplaceable_after: int | None, running_long_after: int | None,
             late_start_after: int | None, database_url: str, as_json: bool) -> None:
    """Tell CHANNEL about events of PROJECT (or one TASK). Runs are notified when they end:
    a failure the task retries is notified once, after its last attempt. misfired and
    recovered concern the triggers of the project (or of the task). unplaceable: a queued
    Run whose required worker labels no live worker offers, once it has waited
    --unplaceable-after. Opt-in: started (a Run's attempt started), succeeded,
    running_long (still running --running-long-after after its attempt started) and
    late_start (not started --late-start-after after its scheduled time). Each is sent at
    most once per Run. A rule covers what happens after it was added.

    \b
    ql notify rule add --channel ops --project demo --events failed,running_long,late_start \\
        --running-long-after 30m --late-start-after 5m
    """
    with naming(FIELDS):
        wanted = parse_events(events) if events else DEFAULT_EVENTS
    with naming(DELAY_OPTIONS), _notifications(database_url) as notifications:
        rules = notifications.add_rule(channel_name, project, task_id, wanted,
                                       unplaceable_after,
                                       running_long_after_ms=running_long_after,
                                       late_start_after_ms=late_start_after)
    if as_json:
        emit_json([rule_view(r) for r in rules])
        return
    for item in rules:
        said = events_text(item.events, item.delays, with_delay=True)
        say(f"{item.channel} is told about {said} of "
            f"{item.project_id}/{item.task_id or '*'}")


@rule.command("list")
@click.option("--channel", "channel_name", metavar="CHANNEL", help="Only this channel.")
@click.option("--project", metavar="PROJECT", help="Only this project.")
@database_url_option
@json_option
def rule_list(channel_name: str | None, project: str | None, database_url: str,
              as_json: bool) -> None:
    """List the rules."""
    with _notifications(database_url) as notifications:
        rules = notifications.rules(channel=channel_name, project_id=project)
    if as_json:
        emit_json([rule_view(r) for r in rules])
        return
    emit_table([(r.channel, r.project_id, r.task_id or "*", events_text(r.events, None),
                 delay_text(r.unplaceable_after_ms), delay_text(r.running_long_after_ms),
                 delay_text(r.late_start_after_ms), when(r.created_at_ms)) for r in rules],
               ["CHANNEL", "PROJECT", "TASK", "EVENTS", "UNPLACEABLE AFTER",
                "RUNNING LONG AFTER", "LATE START AFTER", "SINCE"])


@rule.command("remove")
@click.option("--channel", "channel_name", required=True, metavar="CHANNEL")
@click.option("--project", required=True, metavar="PROJECT")
@click.option("--task", "task_id", metavar="TASK", help="The rule of this task (default: the "
                                                        "project-wide rule).")
@click.option("--events", multiple=True, metavar="LIST",
              help="Only these events (default: the whole rule).")
@database_url_option
@json_option
def rule_remove(channel_name: str, project: str, task_id: str | None, events: tuple[str, ...],
                database_url: str, as_json: bool) -> None:
    """Stop telling CHANNEL about PROJECT (or TASK): the whole rule, or some --events."""
    with naming(FIELDS):
        wanted = parse_events(events) if events else None
    with _notifications(database_url) as notifications:
        removed = notifications.remove_rule(channel_name, project, task_id, wanted)
    if as_json:
        emit_json(RuleRemovedView(removed=removed))
        return
    say(f"removed {removed} event(s) from the rule {channel_name} -> {project}/{task_id or '*'}")
