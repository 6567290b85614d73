"""`ql control`: one cluster-control replica on PostgreSQL (leaderless, row leases)."""

from __future__ import annotations

import logging
import threading
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import click

from qinglong import heap
from qinglong.cli.console import EventConsole
from qinglong.cli.output import rfc3339
from qinglong.cli.params import json_events_option, setting_option
from qinglong.cli.stop_signals import StopSignals
from qinglong.domain.decision import Decision
from qinglong.domain.schedule import ScheduleClaim
from qinglong.profiles.reports import (
    CommitOutcome,
    CommitResult,
    RescuedAttempt,
    admitted_what,
)

if TYPE_CHECKING:
    from qinglong.profiles.cluster import ControlSeams


class ControlConsole(EventConsole):
    def __init__(self, *, owner: str, json_events: bool, log_admissions: bool) -> None:
        super().__init__(json_events=json_events, who={"owner": owner})
        self._log_admissions = log_admissions

    def committed(self, claim: ScheduleClaim, decision: Decision, result: CommitResult) -> None:
        if not (self._json or self._log_admissions):
            return
        c = claim.candidate
        event = {
            "event": result.outcome.value, "disposition": decision.disposition.value,
            "project": c.project_id, "trigger": c.trigger_id, "trigger_revision": c.trigger_revision,
            "run_id": result.run_id, "flow_run_id": result.flow_run_id,
            "scheduled_for_ms": decision.scheduled_for_ms,
            "claim_version": claim.fence.version, "claim_acquired_at_ms": claim.fence.acquired_at_ms,
            "reason": result.reason, "in_doubt": result.in_doubt, "durable": result.durable,
        }
        if result.outcome is CommitOutcome.ADMITTED:
            text = (f"admitted {c.project_id}/{c.trigger_id} @ {rfc3339(decision.scheduled_for_ms)} "
                    f"{admitted_what(result)}")
        else:
            text = f"{result.outcome.value} {c.project_id}/{c.trigger_id} ({result.reason or decision.disposition.value})"
        self._emit(event, text)

    def rescued(self, attempt: RescuedAttempt) -> None:
        self._emit({"event": "rescued", "run_id": attempt.run_id, "attempt_id": attempt.attempt_id,
                    "previous_status": attempt.previous_status, "outcome": attempt.outcome,
                    "worker": attempt.worker},
                   f"reconciled run {attempt.run_id}: lease of {attempt.worker} expired while "
                   f"{attempt.previous_status}; {attempt.outcome}")

    def state(self, state: StrEnum, reason: str) -> None:
        self._emit({"event": "state", "state": state.value, "reason": reason}, f"{state.value}: {reason}")

    def warning(self, code: str, message: str) -> None:
        self._emit({"event": "warning", "code": code, "message": message},
                   f"warning {code}: {message}", err=True)


@click.command()
@click.option("--database-url", default=None, metavar="URL",
              help="postgresql:// URL of the ql_runtime role (env QL_DATABASE_URL). Multi-host URLs "
                   "with target_session_attrs=read-write are supported. No passwords here.")
@setting_option("--owner-id", str, "This replica's unique name (env QL_CONTROL_OWNER_ID): a name a "
                "live process holds is refused (exit 4); a crashed one's is free 30 s after its last "
                "heartbeat, and a start waits for that.")
@setting_option("--lease-ms", click.INT, "Claim lease, 1000-60000 ms (default 10000). It must be "
                "shorter than --grace-ms: a dead replica's claims are taken over after it.")
@setting_option("--grace-ms", click.INT, "Misfire grace, 0-300000 ms (default 30000).")
@click.option("--allow-lease-over-grace", is_flag=True, default=None,
              help="Accept a --lease-ms not shorter than --grace-ms (env "
                   "QL_CONTROL_ALLOW_LEASE_OVER_GRACE): occurrences a dying replica holds may "
                   "then misfire; refused otherwise.")
@setting_option("--budget", click.INT, "Claims per cycle, 1-256 (default 256); a cycle that uses it "
                "all starts the next at once.")
@setting_option("--batch", click.INT, "Rows claimed per statement, 1-256 (default 256); their "
                "decisions commit together in one SERIALIZABLE transaction.")
@setting_option("--interval-ms", click.INT, "Longest sleep between cycles while the replica cannot "
                "LISTEN for publishes, 250-3600000 ms (default 1000). While it listens it sleeps until "
                "the next due instant, at most 5 s or this interval if longer.")
@setting_option("--stop-timeout-ms", click.INT, "How long stop waits for a cycle, 100-30000 ms (default 10000).")
@setting_option("--commit-deadline-ms", click.INT, "Client-side COMMIT deadline (default 5000).")
@setting_option("--pool-size", click.INT, "Database connections, 1-64 (default 4).")
@setting_option("--reactivate-ms", click.INT, "Pause between activation attempts (default 1000).")
@setting_option("--log-retention-days", click.INT,
                "Keep the output workers stored for Attempts that ended this many days ago, 1-3650 "
                "(default 14); older output is deleted once a minute.")
@setting_option("--retention-days", click.INT,
                "Keep claim records and the events of Runs that ended this many days ago, 0 (for "
                "ever) or 1-3650 (default 30); older ones are deleted in small batches once a minute. "
                "Runs themselves are kept (docs/retention.md).")
@setting_option("--http", str, "HOST:PORT for /livez, /readyz, /status, /metrics (default 127.0.0.1:8081).")
@json_events_option
@click.option("--log-admissions", is_flag=True, help="Print a line per admission.")
def control(json_events: bool, log_admissions: bool, **flags: Any) -> None:
    """Run one cluster-control replica until SIGINT or SIGTERM.

    Any number of identical replicas may run against one database: each claims due
    schedule rows with short fenced leases and admits each occurrence exactly once.
    Configuration is validated before PostgreSQL is opened; unknown options are refused.
    It must connect as ql_runtime (another role: exit 3). On a signal /readyz turns 503
    first, then the scheduler drains, then the pool closes.
    """
    run_control(flags, json_events=json_events, log_admissions=log_admissions)


def run_control(flags: dict[str, Any], *, json_events: bool, log_admissions: bool,
                seams: ControlSeams | None = None) -> None:
    """What `ql control` does once its options are parsed; a program that embeds a replica
    (the fault-test harness) calls it with its own ``seams``."""
    # The cluster profile (psycopg, the HTTP server) loads only when this command runs, so
    # the edge and standalone paths of `ql` never import PostgreSQL code.
    from qinglong.cli.params import check_cli_url
    from qinglong.domain.schedule import lease_grace_risk
    from qinglong.profiles.availability import Availability
    from qinglong.profiles.cluster import ClusterControl
    from qinglong.profiles.cluster_config import load_control_settings
    from qinglong.security import redact_url

    check_cli_url(flags.get("database_url"))
    settings = load_control_settings(flags)
    # The pool's own connection-attempt warnings are multi-line noise: failures reach the
    # operator as our diagnostics (and /readyz, /status) instead.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    console = ControlConsole(owner=settings.owner_id, json_events=json_events,
                             log_admissions=log_admissions)
    risk = lease_grace_risk(settings.lease_ms, settings.grace_ms)
    if risk is not None:  # accepted with --allow-lease-over-grace: still said at each start
        console.warning("QL_CONFIG_WARNING", risk)
    app = ClusterControl(settings, console, seams)
    stop = threading.Event()

    def on_repeat() -> None:
        raise SystemExit(130)

    with StopSignals(stop, on_repeat):
        port = app.start_http()
        console.state(Availability.STARTING,
                      f"http on port {port}; database {redact_url(settings.database_url)}")
        heap.settle()
        result = app.run(stop)
    console.state(Availability.STOPPING, f"stopped ({result.value})")
