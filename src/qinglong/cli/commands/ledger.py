"""`ql trigger ledger`: every nominal occurrence of a trigger in a window and its fate.

Attached to the `trigger` group when this module is imported (cli/main.py does).
"""

from __future__ import annotations

import click

from qinglong.cli.commands.trigger import trigger, trigger_option
from qinglong.cli.context import CLOCK, services
from qinglong.cli.output import emit_json, emit_table, say
from qinglong.cli.params import Instant, database_url_option, json_option, project_option
from qinglong.service.ledger import DEFAULT_LIMIT, MAX_LIMIT


def _time_text(local: str, at: str) -> str:
    """``2026-12-01 08:00:00+08:00 (00:00:00Z)``; just the UTC time for a UTC trigger."""
    if local.endswith("+00:00"):
        return at.replace("T", " ").replace(".000Z", "Z")
    return f"{local.replace('T', ' ')} ({at[11:19]}Z)"


def _short(run_id: str) -> str:
    return run_id[:13]


@trigger.command("ledger")
@project_option
@trigger_option
@click.option("--from", "from_ms", type=Instant(ago=True, now_ms=CLOCK.now_ms), metavar="TIME",
              help="Start of the window: RFC 3339, epoch ms, or a duration ago (2h, 1d). "
                   "Default: an hour before its end.")
@click.option("--to", "to_ms", type=Instant(ago=True, now_ms=CLOCK.now_ms), metavar="TIME",
              help="End of the window (same forms). Default: now, followed by the next 3 "
                   "occurrences (pending).")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=DEFAULT_LIMIT,
              show_default=True, help="Show the most recent N occurrences of the window.")
@database_url_option
@json_option
def ledger(project: str, trigger_id: str, from_ms: int | None, to_ms: int | None, limit: int,
           database_url: str, as_json: bool) -> None:
    """The occurrence ledger of TRIGGER: every nominal time in a window and its fate,
    newest first.

    \b
    ran         one Run stands for it (RUN, STATUS)
    duplicate   more than one Run does: a violation (all are shown)
    skipped     a misfire decision dropped it (skip, or fire_once after the first)
    paused      it fell in a pause
    archived    the project was archived
    due         not decided yet, and its time has come (the scheduler is behind or down)
    pending     not decided yet, still ahead
    superseded  the revision stopped (republished, disabled) or the project was archived
                within 60 s after it, before the scheduler reached it
    missing     none of these: a gap `ql audit` reports

    Times are in the trigger's time zone, with UTC in brackets; a jittered occurrence shows
    how long after it it was due (+83s jitter). Manual Runs (`ql trigger
    fire`) are not occurrences and are not shown. A window holding more than
    100,000 occurrences is refused (exit 2): choose a narrower one.
    """
    now_ms = CLOCK.now_ms()
    with services(database_url) as opened:
        view = opened.ledger.ledger(project, trigger_id, now_ms=now_ms,
                                                 from_ms=from_ms, to_ms=to_ms, limit=limit)
    if as_json:
        emit_json(view)
        return
    occurrences = view.occurrences
    end = "now" if to_ms is None else view.to
    say(f"{project}/{trigger_id}: occurrences from {view.from_} to {end}"
        + (" and the next ones" if to_ms is None else "") + ", newest first")
    rows = []
    for item in occurrences:
        runs = item.runs
        due_ms = item.at_ms if item.due_at_ms is None else item.due_at_ms
        late = (due_ms - item.at_ms) // 1000
        rows.append((
            _time_text(item.local, item.at) + (f" +{late}s jitter" if late else ""),
            item.fate,
            ", ".join(_short(run.id) for run in runs) or "-",
            ", ".join(run.status if run.type == "cron" else f"{run.status} ({run.type})"
                      for run in runs) or "-",
        ))
    emit_table(rows, ["TIME", "FATE", "RUN", "STATUS"])
    counts = view.counts
    total = sum(counts.values())
    if total:
        say(f"{total} occurrence(s): " + ", ".join(f"{n} {fate}" for fate, n in counts.items()))
    not_shown = view.not_shown
    if not_shown:
        say(f"{not_shown} earlier occurrence(s) in the window not shown (--limit {limit}; "
            f"raise it, up to {MAX_LIMIT:,}, or move --from/--to)")

