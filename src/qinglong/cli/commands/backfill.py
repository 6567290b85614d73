"""`ql trigger backfill`: admit the past occurrences of a trigger that have no Run, once each.

Attached to the `trigger` group when this module is imported (cli/main.py does).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import click

from qinglong.cli.commands.trigger import trigger, trigger_option
from qinglong.cli.context import CLOCK, services
from qinglong.cli.output import emit_json, say, warn, when
from qinglong.cli.params import (
    Instant,
    actor_option,
    database_url_option,
    json_option,
    project_option,
)
from qinglong.cli.stop_signals import StopSignals
from qinglong.domain.backfill import (
    DEFAULT_RATE,
    MAX_RATE,
    MIN_RATE,
    BackfillRequest,
)
from qinglong.domain.manual import actor_name
from qinglong.service.backfill import (
    BackfillPlan,
    BackfillProgress,
    plan_view,
    summary_view,
)
from qinglong.service.errors import EXIT_INTERRUPTED

_TIME_HELP = "RFC 3339 (2026-03-08T09:00:00Z), epoch milliseconds, or a duration ago (2h, 1d)"


@contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """SIGINT (Ctrl-C) and SIGTERM set the event: the backfill stops between two admissions.
    A second signal interrupts at once (a transaction in flight is rolled back)."""
    stop = threading.Event()

    def on_repeat() -> None:
        raise KeyboardInterrupt

    with StopSignals(stop, on_repeat):
        yield stop


def _say_plan(plan: BackfillPlan, rate: float | None) -> None:
    request, revision = plan.request, plan.target.trigger
    pace = f" at {rate:g}/s" if rate is not None else ""
    say(f"backfill {request.project_id}/{request.trigger_id} (revision {revision.revision}: "
        f"{revision.spec.expression!r} in {revision.spec.timezone}) from {when(request.from_ms)} "
        f"to {when(request.to_ms)}: {len(plan.occurrences)} occurrences, "
        f"{len(plan.existing)} already have a Run; "
        + ("would admit" if rate is None else "admitting") + f" {len(plan.to_admit)}{pace}")


def _say_progress(progress: BackfillProgress) -> None:
    upcoming = f"; next {when(progress.next_ms)}" if progress.next_ms is not None else ""
    warn(f"progress: {progress.done}/{progress.occurrences} occurrences (admitted "
         f"{progress.admitted}, already had a Run {progress.existing}){upcoming}; "
         f"{progress.elapsed_s:.0f} s")


def _say_summary(plan: BackfillPlan, progress: BackfillProgress) -> None:
    counts = (f"admitted {progress.admitted}, already had a Run {progress.existing}, "
              f"skipped {progress.skipped}")
    target = f"{plan.request.project_id}/{plan.request.trigger_id}"
    if progress.state == "done":
        say(f"backfilled {target}: {counts} ({progress.elapsed_s:.1f} s)")
    else:
        what = "interrupted" if progress.state == "interrupted" else "stopped by an error"
        say(f"{what}: {target}: {counts}; the next occurrence was {when(progress.next_ms)}. "
            "Run the same command again to carry on: nothing is admitted twice")
    if progress.in_doubt:
        say(f"({progress.in_doubt} admissions lost the database's reply to COMMIT and were "
            "found by their idempotency key)")


@trigger.command("backfill")
@project_option
@trigger_option
@click.option("--from", "from_ms", required=True, metavar="TIME",
              type=Instant(ago=True, now_ms=CLOCK.now_ms),
              help=f"First instant of the window (included): {_TIME_HELP}.")
@click.option("--to", "to_ms", required=True, metavar="TIME",
              type=Instant(ago=True, now_ms=CLOCK.now_ms),
              help=f"Last instant of the window (included), before the trigger's cursor: "
                   f"{_TIME_HELP}.")
@click.option("--rate", type=click.FloatRange(MIN_RATE, MAX_RATE), default=DEFAULT_RATE,
              show_default=True, metavar="N", help="Admissions per second at most.")
@click.option("--dry-run", is_flag=True,
              help="Show what would be admitted; write nothing.")
@actor_option
@database_url_option
@json_option
def backfill(project: str, trigger_id: str, from_ms: int, to_ms: int, rate: float,
             dry_run: bool, actor: str, database_url: str, as_json: bool) -> None:
    """Admit TRIGGER's past occurrences in [--from, --to] that have no Run, one Run each.

    Occurrences are those of the trigger's current revision. The window may start before
    the trigger was first published (the history of a migrated crontab), must end before its
    cursor (the first occurrence its scheduler has not decided: never in the future), and
    may hold up to 10,000 occurrences. An
    occurrence that already has a Run (scheduled or backfilled) is left alone; each other one
    is admitted in its own transaction as a Run of origin backfill (the trigger's overlap
    policy and the task's limits apply when it runs). Progress goes to stderr every few
    seconds. Ctrl-C stops between two admissions (exit 130); running the same command again
    carries on, admitting nothing twice. On PostgreSQL connect as ql_runtime.
    """
    request = BackfillRequest(project_id=project, trigger_id=trigger_id, from_ms=from_ms,
                              to_ms=to_ms, actor=actor_name(actor, "--actor"))
    with services(database_url) as opened:
        backfills = opened.backfills
        plan = backfills.plan(request)
        if dry_run:
            if as_json:
                emit_json(plan_view(plan))
                return
            _say_plan(plan, None)
            if plan.to_admit:
                first, last = plan.to_admit[0], plan.to_admit[-1]
                say(f"first {when(first)}, last {when(last)}; dry run: nothing was written")
            else:
                say("dry run: nothing was written")
            return
        if not as_json:
            _say_plan(plan, rate)
        with _stop_on_signals() as stop:
            progress = backfills.run(plan, rate=rate, stop=stop,
                                     on_progress=None if as_json else _say_progress)
    if as_json:
        emit_json(summary_view(plan, progress, rate))
    else:
        _say_summary(plan, progress)
    if progress.error is not None:
        raise progress.error
    if progress.state == "interrupted":
        raise SystemExit(EXIT_INTERRUPTED)
