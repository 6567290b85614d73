"""`ql worker`: run admitted cluster Runs under fenced leases (any number, any host)."""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

import click

from qinglong import heap
from qinglong.cli.console import EventConsole
from qinglong.cli.params import DURATION, json_events_option, setting_option
from qinglong.cli.stop_signals import StopSignals
from qinglong.errors import InvalidInput
from qinglong.profiles.reports import RunFinished


class WorkerConsole(EventConsole):
    def __init__(self, *, worker: str, json_events: bool, quiet: bool) -> None:
        super().__init__(json_events=json_events, quiet=quiet, who={"worker": worker})

    def finished(self, finished: RunFinished) -> None:
        detail = f"exit {finished.exit_code}" if finished.exit_code is not None else (
            finished.error_summary or "")
        self._emit({"event": "finished", "run_id": finished.run_id, "trigger": finished.trigger_id,
                    "status": finished.status, "exit_code": finished.exit_code,
                    "duration_ms": finished.duration_ms,
                    "scheduled_for_ms": finished.scheduled_for_ms},
                   f"{finished.status:<10} run {finished.run_id} ({finished.trigger_id}) {detail} "
                   f"in {finished.duration_ms} ms")

    def state(self, state: str, reason: str) -> None:
        self._emit({"event": "state", "state": state, "reason": reason}, f"{state}: {reason}")


@click.command()
@click.option("--database-url", default=None, metavar="URL",
              help="postgresql:// URL of the ql_worker role (env QL_DATABASE_URL). No passwords "
                   "here: use PGPASSWORD, ~/.pgpass or QL_DATABASE_PASSWORD_FILE.")
@setting_option("--worker-id", str, "This worker's name (env QL_WORKER_WORKER_ID), held by one live "
                "process at a time; each start also gets a fresh session id, so a "
                "restart never inherits leases.")
@setting_option("--slots", click.INT, "Commands run at once, 1-256 (default 4).")
@setting_option("--lease-ms", click.INT, "Lease per Attempt, renewed every third of it; commands are "
                "killed if it cannot be renewed for 80% of it. 5000-600000 "
                "(default 30000).")
@setting_option("--drain-timeout-ms", click.INT, "On SIGTERM, how long running commands may finish "
                "before they are stopped and queued again (default "
                "30000).")
@click.option("--drain-timeout", "drain_timeout", type=DURATION, default=None, metavar="DURATION",
              help="The same as --drain-timeout-ms, as a duration (30s, 2m).")
@setting_option("--poll-ms", click.INT, "How often to look for work without a notification, 100-60000 "
                "(default 1000).")
@setting_option("--log-max-bytes", click.INT, "Output kept per attempt, head and tail (default 16 MiB).")
@setting_option("--log-dir", str, "Where output is spooled while it is shipped (default: a temp dir).")
@setting_option("--pool-size", click.INT, "Database connections, 2-64 (default: slots/2 + 2, at "
                "least 4, at most 32).")
@setting_option("--http", str, "HOST:PORT for /livez, /readyz, /status, /metrics (default "
                "127.0.0.1:8082).")
@setting_option("--labels", str, "What this worker offers for placement, KEY or KEY=VALUE, "
                "comma-separated (region=eu,gpu; env QL_WORKER_LABELS). A task that "
                "--requires labels runs only on a worker that has them all; a worker "
                "without labels takes only Runs that require none (docs/placement.md).")
@setting_option("--nice", click.INT, "Niceness of every command, 0-19 (default 0): the worker "
                "itself keeps its own, so its leases and renewals are not slowed.")
@setting_option("--run-as", str, "Run every command as this user (HOME, USER and LOGNAME "
                "set to its own); only for a worker started as root, refused otherwise.")
@setting_option("--repos-url", str, "postgresql:// URL of a role that may publish (ql_admin): "
                "this worker then also runs Git subscriptions' pulls (it offers the label "
                "ql-repos), whose command alone is given this URL to import with "
                "(env QL_WORKER_REPOS_URL; docs/subscriptions.md).")
@setting_option("--deps-dir", str, "Where projects' dependency environments are built and "
                "cached, one per set digest (default $XDG_CACHE_HOME/qinglong/deps, else "
                "~/.cache/qinglong/deps; env QL_WORKER_DEPS_DIR; docs/dependencies.md).")
@json_events_option
@click.option("--quiet", is_flag=True, help="Print only errors.")
def worker(json_events: bool, quiet: bool, **flags: Any) -> None:
    """Run admitted cluster Runs until SIGINT or SIGTERM (any number of workers, any host).

    Each Run is taken with a lease on its Attempt (FOR UPDATE SKIP LOCKED), its command runs
    in its own process group, output is shipped to the database as it is written, and every
    write is fenced by the lease, so a worker that was paused or cut off can never overwrite
    what happened since. On a signal the worker stops taking work, lets running commands
    finish for --drain-timeout-ms, then stops them and queues their Runs again without
    spending an attempt; a second signal stops at once.

    It must connect as ql_worker (another role: exit 3), and its --worker-id must not be
    held by a live process (exit 4; a crashed one's id is free 30 s after its last
    heartbeat, and a start waits for that).

    A task's --memory-limit is a memory cgroup's where this worker may create cgroups (cgroup
    v2 with the memory controller delegated to it, or v1 as root): the command's resident
    memory is bounded and an Attempt the kernel kills for it ends MEMORY_LIMIT. Elsewhere it
    is applied with setrlimit through util-linux prlimit (address space: an allocation beyond
    it fails). --cpu-limit is setrlimit's everywhere: the command is stopped with SIGXCPU and
    its Attempt ends CPU_LIMIT (docs/controls/limits.md). The worker says at start, and
    /status says, which this host applies.
    """
    from qinglong.cli.params import check_cli_url
    from qinglong.domain.placement import labels_text
    from qinglong.profiles.worker import WorkerApp
    from qinglong.profiles.worker_config import load_worker_settings
    from qinglong.security import redact_url

    check_cli_url(flags.get("database_url"))
    drain = flags.pop("drain_timeout", None)
    if drain is not None:
        if flags.get("drain_timeout_ms") is not None:
            raise InvalidInput("drain-timeout", "give --drain-timeout or --drain-timeout-ms, "
                                                "not both")
        flags["drain_timeout_ms"] = drain
    settings = load_worker_settings(flags)
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    console = WorkerConsole(worker=settings.worker_id, json_events=json_events, quiet=quiet)
    app = WorkerApp(settings, console)
    stop = threading.Event()

    def hard_stop() -> None:
        killed = app.hard_stop()
        console.state("stopping", f"second signal: {killed} commands killed")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)  # at once: no drain, no cleanup that could wait on the database

    def on_repeat() -> None:
        # Not in the handler: it runs on the main thread, which may be holding the very
        # locks a hard stop takes (the executor's job list, the console) -- it would wait
        # on itself for ever. A thread of its own takes them once the main thread, ended
        # here (the drain writes nothing more), has let them go.
        threading.Thread(target=hard_stop, name="ql-hard-stop", daemon=True).start()
        raise SystemExit(130)

    with StopSignals(stop, on_repeat):
        try:
            port = app.start_http()
            console.state("starting", f"http on port {port}; session {app.session}; labels "
                                      f"{labels_text(settings.label_map)}; database "
                                      f"{redact_url(settings.database_url)}; limits: "
                                      f"{app.limits_support}")
            heap.settle()
            app.start(stop)
            while not stop.wait(0.5):
                pass
            interrupted = app.drain()
            console.state("stopped", f"drained; {interrupted} commands stopped and queued again")
        finally:
            app.close()
    if app.failure is not None:  # its id was taken over by a live process: exit 4
        raise app.failure
