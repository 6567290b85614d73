"""`ql serve`: the standalone (or edge) scheduler and executor on SQLite."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click

from qinglong import heap
from qinglong.cli.commands.web import second_factor_option, trusted_proxy_option
from qinglong.cli.console import EventConsole, stamp
from qinglong.cli.context import CLOCK
from qinglong.cli.output import rfc3339
from qinglong.cli.params import DURATION, json_events_option, sqlite_url_option
from qinglong.cli.sso_options import sso_options
from qinglong.cli.stop_signals import StopSignals
from qinglong.domain.decision import Decision, Disposition
from qinglong.domain.placement import parse_labels
from qinglong.domain.retention import DEFAULT_RETENTION_DAYS, KEEP_FOREVER, MAX_RETENTION_DAYS
from qinglong.domain.schedule import ScheduleCandidate
from qinglong.errors import InvalidInput, StorageError
from qinglong.profiles.local import (
    DEFAULT_LOG_BYTES,
    DEFAULT_LOG_RETENTION_DAYS,
    MAX_LOG_RETENTION_DAYS,
    PROFILES,
    LocalApp,
    LocalServeConfig,
    sqlite_path_from_url,
)
from qinglong.profiles.open import capabilities_of
from qinglong.profiles.reports import (
    CommitOutcome,
    CommitResult,
    RescuedAttempt,
    RunFinished,
    admitted_what,
)

if TYPE_CHECKING:
    from qinglong.service.sso_settings import SsoSettings
    from qinglong.web.server import RunningApi
    from qinglong.web.transport import Network


class ConsoleObserver(EventConsole):
    """Prints admissions, results and problems as they happen (or JSON lines)."""

    _error_label = "error     "  # aligned with the other events' words

    def __init__(self, *, quiet: bool, json_events: bool) -> None:
        super().__init__(json_events=json_events, quiet=quiet)

    def admitted(self, candidate: ScheduleCandidate, decision: Decision, result: CommitResult) -> None:
        name = f"{candidate.project_id}/{candidate.trigger_id}"
        base: dict[str, object] = {
            "project": candidate.project_id,
            "trigger": candidate.trigger_id,
            "trigger_revision": candidate.trigger_revision,
            "outcome": result.outcome.value,
            "disposition": decision.disposition.value,
        }
        if result.outcome is CommitOutcome.ADMITTED:
            self._emit(
                {**base, "event": "admitted", "run_id": result.run_id,
                 "flow_run_id": result.flow_run_id,
                 "scheduled_for_ms": decision.scheduled_for_ms, "misfired": decision.misfired},
                f"admitted   {name} @ {rfc3339(decision.scheduled_for_ms)} {admitted_what(result)}"
                + (" (misfired, fire_once)" if decision.misfired else ""),
            )
        elif result.outcome is CommitOutcome.RACED:
            self._emit({**base, "event": "raced", "reason": result.reason},
                       f"raced      {name} ({result.reason})")
        elif decision.disposition is Disposition.SKIP:
            upcoming = (f"next {rfc3339(decision.next_fire_at_ms)}"
                        if decision.next_fire_at_ms is not None else "nothing after it: done")
            self._emit(
                {**base, "event": "skipped", "due_at_ms": decision.due_at_ms,
                 "next_fire_at_ms": decision.next_fire_at_ms},
                f"skipped    {name} occurrences from {rfc3339(decision.due_at_ms)} "
                f"(misfire policy skip); {upcoming}",
            )
        else:
            first = (f"first at {rfc3339(decision.next_fire_at_ms)}"
                     if decision.next_fire_at_ms is not None
                     else "done: no occurrence from its publish time on")
            self._emit(
                {**base, "event": "initialized", "next_fire_at_ms": decision.next_fire_at_ms},
                f"scheduled  {name} {first}",
            )

    def finished(self, finished: RunFinished) -> None:
        detail = f"exit {finished.exit_code}" if finished.exit_code is not None else (
            finished.error_summary or "")
        self._emit(
            {"event": "finished", "run_id": finished.run_id, "trigger": finished.trigger_id,
             "status": finished.status, "exit_code": finished.exit_code,
             "duration_ms": finished.duration_ms, "scheduled_for_ms": finished.scheduled_for_ms},
            f"{finished.status:<10} run {finished.run_id} ({finished.trigger_id or '-'}) {detail} "
            f"in {finished.duration_ms} ms",
        )

    def reconciled(self, attempt: RescuedAttempt) -> None:
        if attempt.outcome == "requeued":
            text = (f"requeued   run {attempt.run_id}: leased but never started when the "
                    "executor stopped; it runs again")
        else:
            text = (f"lost       run {attempt.run_id} was {attempt.previous_status} when the "
                    f"executor stopped; marked lost (pid {attempt.pid or '-'})")
        self._emit(
            {"event": "reconciled", "run_id": attempt.run_id,
             "previous_status": attempt.previous_status, "outcome": attempt.outcome,
             "pid": attempt.pid},
            text,
        )


@click.command()
@sqlite_url_option
@click.option("--profile", type=click.Choice(sorted(PROFILES)), default="standalone", show_default=True,
              help="standalone: up to 256 decisions per cycle, all in one commit, a cycle a second (at once after a full one); edge: 4 per 5 s.")
@click.option("--grace", type=DURATION, default="30s", show_default=True,
              help="Misfire grace: an occurrence later than this follows the trigger's misfire policy.")
@click.option("--budget", type=click.IntRange(1, 256), help="Decisions per cycle (profile default).")
@click.option("--interval", type=DURATION, help="Cycle cadence, 250ms..1h (profile default).")
@click.option("--concurrency", type=click.IntRange(1, 256), default=4, show_default=True,
              help="Runs executing at once.")
@click.option("--log-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where attempt logs go (default: <database>.logs next to the database).")
@click.option("--deps-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where projects' dependency environments are built and cached, one per "
                   "set digest (default: <database>.deps next to the database; "
                   "docs/dependencies.md).")
@click.option("--log-max-bytes", type=click.IntRange(1024, 1024**3), default=DEFAULT_LOG_BYTES,
              show_default=True,
              help="Per-attempt log size cap: the first and the last half of the output are "
                   "kept, with a line saying how many bytes were dropped between them.")
@click.option("--log-retention-days", type=click.IntRange(1, MAX_LOG_RETENTION_DAYS),
              default=DEFAULT_LOG_RETENTION_DAYS, show_default=True,
              help="Delete attempt logs last written this many days ago (checked every minute).")
@click.option("--retention-days", type=click.IntRange(KEEP_FOREVER, MAX_RETENTION_DAYS),
              default=DEFAULT_RETENTION_DAYS, show_default=True,
              help="Keep the events of Runs that ended this many days ago; older ones are "
                   "deleted in small batches every minute (0: keep them for ever). Runs "
                   "themselves are kept (docs/retention.md).")
@click.option("--drain-timeout", type=DURATION, default="10s", show_default=True,
              help="On stop, how long running commands may finish before they are cancelled.")
@click.option("--labels", metavar="KEY[=VALUE],...",
              help="What this process's executor offers for placement (region=eu,gpu): a task "
                   "that --requires labels runs only where they all are (docs/placement.md).")
@click.option("--nice", type=click.IntRange(0, 19), default=0, show_default=True,
              help="Niceness of every command; the server keeps its own (docs/controls/limits.md).")
@click.option("--run-as", metavar="USER",
              help="Run every command as USER (only for a server started as root).")
@click.option("--duration", type=DURATION, help="Stop by itself after this long (e.g. 20s).")
@click.option("--quiet", is_flag=True, help="Print only errors.")
@json_events_option
@click.option("--http", "listen", metavar="HOST:PORT",
              help="Also serve the HTTP API (/api/v1) here, e.g. 127.0.0.1:8080 (loopback "
                   "only, unless --allow-remote).")
@click.option("--allow-remote", is_flag=True,
              help="Let --http bind an address that is not loopback (then put TLS in front).")
@trusted_proxy_option
@second_factor_option
@sso_options
def serve(
    database_url: str, profile: str, grace: int, budget: int | None, interval: int | None,
    concurrency: int, log_dir: Path | None, deps_dir: Path | None, log_max_bytes: int, log_retention_days: int,
    retention_days: int, drain_timeout: int, labels: str | None, nice: int,
    run_as: str | None,
    duration: int | None, quiet: bool, json_events: bool, listen: str | None,
    allow_remote: bool, trusted_proxies: tuple[str, ...], require_second_factor: str | None,
    sso: SsoSettings | None,
) -> None:
    """Run the scheduler and the executor until SIGINT or SIGTERM (SQLite profiles).

    On a signal it stops admitting, lets running commands finish for up to
    --drain-timeout, cancels what is left, and exits 0. After a crash, the next
    start marks Runs that were executing as lost, each with an event.
    """
    if capabilities_of(database_url).shared:
        raise InvalidInput("database-url", "ql serve runs on SQLite; use `ql control` for PostgreSQL")
    config = LocalServeConfig(
        database_path=sqlite_path_from_url(database_url),
        profile=PROFILES[profile],
        grace_ms=grace,
        budget=budget,
        interval_s=None if interval is None else interval / 1000,
        concurrency=concurrency,
        log_dir=log_dir,
        deps_dir=deps_dir,
        log_max_bytes=log_max_bytes,
        log_retention_days=log_retention_days,
        retention_days=retention_days,
        drain_timeout_s=drain_timeout / 1000,
        labels=parse_labels([labels], "--labels") if labels else {},
        nice=nice, run_as=run_as,
    ).validated()
    trusted: tuple[Network, ...] = ()
    if listen is not None:
        from qinglong.web.server import check_bind
        from qinglong.web.transport import parse_trusted_proxies

        check_bind(listen, allow_remote)
        trusted = parse_trusted_proxies(trusted_proxies)
    elif allow_remote or trusted_proxies:
        raise InvalidInput("--allow-remote" if allow_remote else "--trusted-proxy",
                           "goes with --http")
    if require_second_factor is not None and listen is None:
        raise InvalidInput("--require-second-factor", "goes with --http")
    if sso is not None and listen is None:
        raise InvalidInput("--oidc-issuer", "goes with --http")
    observer = ConsoleObserver(quiet=quiet, json_events=json_events)
    stop = threading.Event()

    def on_repeat() -> None:
        raise SystemExit(130)  # a second signal: stop waiting for the drain

    app = LocalApp(config, CLOCK, observer)
    with StopSignals(stop, on_repeat):
        # the lock and the schema first, then the port: a port in use (or any other refusal)
        # stops `ql serve` before it admits or runs anything
        app.open()  # on failure it has already closed what it opened
        api = None
        try:
            if listen is not None:
                api = _serve_api(database_url, listen, quiet=quiet, json_events=json_events,
                                 trusted=trusted, app=app, second_factor=require_second_factor,
                                 sso=sso)
        except BaseException:
            app.stop(clean=False)
            raise
        heap.settle()
        try:
            app.start()  # on failure it has already stopped what it started
        except BaseException:
            if api is not None:
                api.stop()
            raise
        try:
            if not quiet and not json_events:
                click.echo(f"{stamp()} serving {config.database_path} ({profile}); Ctrl-C to stop")
            _wait_for_stop(stop, app.failed, None if duration is None else duration / 1000)
        finally:
            if api is not None:
                api.stop()  # no new requests while the scheduler and the commands drain
            if not quiet and not json_events:
                click.echo(f"{stamp()} stopping: draining the scheduler and running commands")
            app.stop()
    if app.failure is not None:
        raise StorageError(f"stopped: {app.failure.message}")
    if not quiet and not json_events:
        click.echo(f"{stamp()} stopped")


def _serve_api(database_url: str, listen: str, *, quiet: bool, json_events: bool,
               app: LocalApp, trusted: tuple[Network, ...] = (),
               second_factor: str | None = None, sso: SsoSettings | None = None
               ) -> RunningApi:
    """The HTTP API over the same SQLite file, on its own connections; its commits wake this
    process's loops (a Run admitted through it starts at once, a trigger published through it
    is decided at once)."""
    from qinglong.profiles.web import open_and_serve
    from qinglong.service.second_factor import SecondFactorPolicy

    api = open_and_serve(database_url, CLOCK, listen, trusted_proxies=trusted,
                         on_commit=app.wakeups.publish,
                         second_factor=SecondFactorPolicy(second_factor), sso=sso)
    host = listen.rpartition(":")[0]
    if json_events:
        click.echo(json.dumps({"at_ms": CLOCK.now_ms(), "event": "http", "host": host,
                               "port": api.port}, sort_keys=True))
    elif not quiet:
        click.echo(f"{stamp()} serving the API on http://{host}:{api.port}/api/v1")
    return api


def _wait_for_stop(stop: threading.Event, failed: threading.Event, limit_s: float | None) -> None:
    """Until a signal, a fatal storage error, or the --duration runs out."""
    deadline = None if limit_s is None else CLOCK.monotonic() + limit_s
    while not stop.is_set() and not failed.is_set():
        left = 0.2 if deadline is None else min(0.2, deadline - CLOCK.monotonic())
        if left <= 0:
            return
        stop.wait(left)
