"""`ql run`: list Runs and show one with its attempts, events and log tail."""

from __future__ import annotations

from pathlib import Path

import click

from qinglong.cli.context import backend
from qinglong.cli.output import emit_json, emit_table, rfc3339, say
from qinglong.cli.params import database_url_option, json_option
from qinglong.domain.model import Attempt, Run, RunEvent
from qinglong.domain.runs import RunStatus
from qinglong.execution.logs import tail
from qinglong.storage.ports import RunListParams


@click.group()
def run() -> None:
    """Runs: one per admitted occurrence, with attempts, events and logs."""


def run_json(item: Run) -> dict[str, object]:
    lag = None
    if item.scheduled_for_ms is not None:
        lag = item.created_at_ms - item.scheduled_for_ms
    return {
        "id": item.id,
        "project": item.project_id,
        "task": item.task_id,
        "task_revision": item.task_revision,
        "trigger": item.trigger_id,
        "trigger_revision": item.trigger_revision,
        "scheduled_for": rfc3339(item.scheduled_for_ms),
        "scheduled_for_ms": item.scheduled_for_ms,
        "status": item.status,
        "version": item.version,
        "idempotency_key": item.idempotency_key,
        "created_at": rfc3339(item.created_at_ms),
        "created_at_ms": item.created_at_ms,
        "admission_lag_ms": lag,
        "started_at": rfc3339(item.started_at_ms),
        "finished_at": rfc3339(item.finished_at_ms),
        "error_code": item.error_code,
        "error_summary": item.error_summary,
    }


def attempt_json(item: Attempt) -> dict[str, object]:
    return {
        "id": item.id,
        "attempt": item.attempt,
        "status": item.status,
        "executor_type": item.executor_type,
        "pid": item.pid,
        "exit_code": item.exit_code,
        "started_at": rfc3339(item.started_at_ms),
        "finished_at": rfc3339(item.finished_at_ms),
        "log_path": item.log_path,
        "error_code": item.error_code,
        "error_summary": item.error_summary,
    }


def event_json(item: RunEvent) -> dict[str, object]:
    return {
        "sequence": item.sequence,
        "type": item.type,
        "actor": f"{item.actor_type}:{item.actor_id}" if item.actor_id else item.actor_type,
        "attempt_id": item.attempt_id,
        "payload": item.payload,
        "at": rfc3339(item.created_at_ms),
    }


@run.command("list")
@click.option("--project", metavar="PROJECT", help="Only this project.")
@click.option("--trigger", "trigger_id", metavar="TRIGGER", help="Only this trigger.")
@click.option("--status", type=click.Choice([s.value for s in RunStatus]), help="Only this status.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--oldest-first", is_flag=True, help="Order by scheduled time ascending.")
@database_url_option
@json_option
def list_runs(
    project: str | None, trigger_id: str | None, status: str | None, limit: int,
    oldest_first: bool, database_url: str, as_json: bool,
) -> None:
    """List Runs, newest occurrence first."""
    with backend(database_url) as store:
        items = store.runs.run_list(
            RunListParams(project_id=project, trigger_id=trigger_id, status=status, limit=limit,
                          oldest_first=oldest_first)
        )
    if as_json:
        emit_json([run_json(item) for item in items])
        return
    emit_table(
        [
            (
                item.id[:13],
                f"{item.project_id}/{item.trigger_id or '-'}",
                rfc3339(item.scheduled_for_ms) or "-",
                item.status,
                rfc3339(item.created_at_ms),
                run_json(item)["admission_lag_ms"],
            )
            for item in items
        ],
        ["RUN", "TRIGGER", "SCHEDULED FOR", "STATUS", "ADMITTED", "LAG MS"],
    )


@run.command()
@click.argument("run_id", metavar="RUN")
@click.option("--tail", "tail_lines", type=click.IntRange(0, 10_000), default=20, show_default=True,
              help="Lines of the last attempt's log to show.")
@database_url_option
@json_option
def show(run_id: str, tail_lines: int, database_url: str, as_json: bool) -> None:
    """Show RUN (a full id or a unique prefix of 8+ characters)."""
    with backend(database_url) as store:
        detail = store.runs.run_get(run_id)
    log_lines: list[str] = []
    last = detail.attempts[-1] if detail.attempts else None
    if last is not None and last.log_path:
        log_lines = tail(Path(last.log_path), tail_lines)
    if as_json:
        emit_json({
            "run": run_json(detail.run),
            "attempts": [attempt_json(a) for a in detail.attempts],
            "events": [event_json(e) for e in detail.events],
            "log_tail": log_lines,
        })
        return
    item = detail.run
    say(f"run        {item.id}")
    say(f"trigger    {item.project_id}/{item.trigger_id} (revision {item.trigger_revision})")
    say(f"task       {item.task_id} ({item.task_name}) {item.task_revision[:24]}")
    say(f"scheduled  {rfc3339(item.scheduled_for_ms)}")
    say(f"status     {item.status}" + (f" ({item.error_code}: {item.error_summary})"
                                        if item.error_code else ""))
    say(f"admitted   {rfc3339(item.created_at_ms)}")
    if item.started_at_ms:
        say(f"started    {rfc3339(item.started_at_ms)}")
    if item.finished_at_ms:
        say(f"finished   {rfc3339(item.finished_at_ms)}")
    for attempt in detail.attempts:
        exit_text = "-" if attempt.exit_code is None else str(attempt.exit_code)
        say(f"attempt {attempt.attempt}  {attempt.status}  pid {attempt.pid or '-'}  exit {exit_text}"
            f"  log {attempt.log_path or '-'}")
    say("events:")
    for event in detail.events:
        say(f"  {event.sequence:>3}  {rfc3339(event.created_at_ms)}  {event.type:<20} "
            f"{event.actor_type}  {event_json(event)['payload']}")
    if log_lines:
        say(f"log (last {len(log_lines)} lines):")
        for line in log_lines:
            say("  | " + line)
