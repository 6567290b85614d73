"""`ql run`: list Runs and show one with its attempts, events and log tail."""

from __future__ import annotations

import json

import click

from qinglong.cli.context import CLOCK, respond, run_views
from qinglong.cli.output import emit_table, say, when
from qinglong.cli.params import Instant, database_url_option, json_option
from qinglong.domain.runs import RunStatus
from qinglong.errors import StorageError
from qinglong.service.params import RunListParams
from qinglong.service.views.runs import RunCancelView, RunDetailView, RunView


@click.group()
def run() -> None:
    """Runs: one per admitted occurrence, with attempts, events and logs."""


def _duration_text(ms: object) -> str:
    if not isinstance(ms, int):
        return "-"
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def _origin_text(item: RunView) -> str:
    """``cron`` for a scheduled Run, ``manual:WHO`` for one somebody asked for (run now),
    ``backfill:WHO`` for a past occurrence somebody backfilled."""
    if item.requested_by is not None:
        return f"{item.trigger_type}:{item.requested_by}"
    return item.trigger_type


@run.command("list")
@click.option("--project", metavar="PROJECT", help="Only this project.")
@click.option("--task", "task_id", metavar="TASK", help="Only Runs of this task.")
@click.option("--trigger", "trigger_id", metavar="TRIGGER", help="Only this trigger.")
@click.option("--status", type=click.Choice([s.value for s in RunStatus]), help="Only this status.")
@click.option("--since", type=Instant(ago=True, now_ms=CLOCK.now_ms), metavar="TIME",
              help="Only Runs for occurrences at or after TIME: RFC 3339, epoch ms, or a "
                   "duration ago (1h, 2d).")
@click.option("--until", type=Instant(ago=True, now_ms=CLOCK.now_ms), metavar="TIME",
              help="Only Runs for occurrences before TIME (same forms as --since).")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--oldest-first", is_flag=True, help="Order by scheduled time ascending.")
@database_url_option
@json_option
def list_runs(
    project: str | None, task_id: str | None, trigger_id: str | None, status: str | None,
    since: int | None, until: int | None, limit: int, oldest_first: bool, database_url: str,
    as_json: bool,
) -> None:
    """List Runs, newest occurrence first. Times are local, with UTC in brackets."""
    params = RunListParams(project_id=project, task_id=task_id, trigger_id=trigger_id,
                           status=status, since_ms=since, until_ms=until, limit=limit,
                           oldest_first=oldest_first)
    respond(run_views(database_url), lambda runs: runs.run_list(params), as_json, _run_table)


def _run_table(items: list[RunView]) -> None:
    emit_table(
        [
            (
                item.id[:13],
                f"{item.project}/{item.trigger or '-'}",
                item.task,
                when(item.scheduled_for_ms),
                item.status,
                "-" if item.exit_code is None else item.exit_code,
                _duration_text(item.duration_ms),
                "-" if item.admission_lag_ms is None else item.admission_lag_ms,
                _origin_text(item),
            )
            for item in items
        ],
        ["RUN", "TRIGGER", "TASK", "SCHEDULED FOR", "STATUS", "EXIT", "DURATION", "LAG MS",
         "ORIGIN"],
    )


@run.command()
@click.argument("run_id", metavar="RUN")
@click.option("--tail", "tail_lines", type=click.IntRange(0, 10_000), default=20, show_default=True,
              help="Lines of the last attempt's log to show.")
@database_url_option
@json_option
def show(run_id: str, tail_lines: int, database_url: str, as_json: bool) -> None:
    """Show RUN (a full id or a unique prefix of 8+ characters): attempts, events, log tail."""
    respond(run_views(database_url), lambda runs: runs.run_show(run_id, tail_lines), as_json,
            lambda view: _say_run(view, tail_lines))


def _say_run(view: RunDetailView, tail_lines: int) -> None:
    item = view.run
    say(f"run        {item.id}")
    if item.trigger is not None:
        say(f"trigger    {item.project}/{item.trigger} (revision {item.trigger_revision})")
    else:
        say(f"trigger    {item.project}/- (run now of the task)")
    if item.trigger_type == "backfill":
        say(f"origin     backfill of a past occurrence, requested by {item.requested_by}")
    elif item.requested_by is not None:
        say(f"origin     manual, requested by {item.requested_by} "
            f"(request id {item.request_id})")
    else:
        say(f"origin     {item.trigger_type} (scheduled)")
    say(f"task       {item.task} ({item.task_name}) {item.task_revision[:24]}")
    say(f"scheduled  {when(item.scheduled_for_ms)}")
    error = f" ({item.error_code}: {item.error_summary})" if item.error_code else ""
    say(f"status     {item.status}{error}")
    say(f"admitted   {when(item.created_at_ms)}")
    if item.parameters:
        say("parameters " + ", ".join(f"{name}={json.dumps(value, ensure_ascii=False)}"
                                      for name, value in item.parameters.items()))
    if item.requires:
        say(f"requires   {', '.join(item.requires)}")
    if view.unplaceable:
        say(f"waiting    {view.unplaceable}: it stays queued until a worker with these "
            "labels is running (ql worker --labels)")
    for label, at in (("started", item.started_at), ("finished", item.finished_at)):
        if at:
            say(f"{label:<10} {at}")
    if item.duration_ms is not None:
        say(f"duration   {_duration_text(item.duration_ms)}")
    log = view.log
    stored = "(database)" if log.stored == "database" else "-"
    for attempt in view.attempts:
        exit_text = "-" if attempt.exit_code is None else str(attempt.exit_code)
        worker = f"  worker {attempt.worker}" if attempt.worker else ""
        say(f"attempt {attempt.attempt}  {attempt.status}  pid {attempt.pid or '-'}  "
            f"exit {exit_text}{worker}  log {attempt.log_path or stored}")
        if attempt.environment_revision is not None:
            say(f"  environment revision {attempt.environment_revision} "
                f"({attempt.environment_digest})")
    say("events:")
    for event in view.events:
        payload = json.dumps(event.payload, sort_keys=True, separators=(", ", ": "))
        say(f"  {event.sequence:>3}  {event.at}  {event.type:<30} {event.actor:<22} "
            f"{payload}")
    lines = view.log_tail
    if lines:
        where = log.path or "(kept in the database)"
        say(f"log {where} (last {len(lines)} lines; `ql run logs` prints it all):")
        for line in lines:
            say("  | " + line)
    elif log.note and tail_lines:
        say(f"log: {log.note}")


@run.command()
@click.argument("run_id", metavar="RUN")
@database_url_option
@json_option
def cancel(run_id: str, database_url: str, as_json: bool) -> None:
    """Cancel RUN. A Run nobody is executing (queued, or waiting for a retry) ends
    `cancelled` at once; a running one is asked to stop: its worker kills the command's
    process group and records `cancelled` (a dead worker's Run is ended `cancelled` by the
    reconciler, never retried). Cancelling an ended Run is refused (exit 2)."""
    respond(run_views(database_url), lambda runs: runs.run_cancel(run_id), as_json,
            _say_cancelled)  # recorded with the reason `user`


def _say_cancelled(view: RunCancelView) -> None:
    if view.cancel == "done":
        say(f"run {view.id} cancelled")
    else:
        say(f"run {view.id} is {view.status}: asked its executor to stop it; "
            f"`ql run show {view.id[:13]}` shows when it has")


@run.command()
@click.argument("run_id", metavar="RUN")
@click.option("--attempt", type=click.IntRange(1, 1000), metavar="N",
              help="Attempt N's output (default: the latest attempt).")
@click.option("--follow", "-f", is_flag=True,
              help="Keep printing new output until the Run ends (Ctrl-C stops following: "
                   "exit 130).")
@database_url_option
def logs(run_id: str, attempt: int | None, follow: bool, database_url: str) -> None:
    """Print the output of RUN's latest attempt (or --attempt N): from its log file on this
    machine (`ql serve`) or from the database, where cluster workers stream it while the
    command runs. A capped log keeps its head and tail with a marker where the middle was.
    Output a worker could not store is marked where it would be, and exits 1."""
    lost: str | None = None
    with run_views(database_url) as runs:
        # Ctrl-C (SIGINT) while following ends the command as an interruption: `ql` exits 130
        for piece in runs.log_stream(run_id, attempt=attempt, follow=follow):
            click.echo(piece.text, nl=False)
            lost = piece.output_lost or lost
    if lost is not None:  # printed where it belongs; the exit code says it too
        raise StorageError(f"run {run_id}: output its worker could not store is missing "
                           f"from this log ({lost})")
