"""A lost COMMIT reply on a worker's batched completions, through the wire proxy.

One `ql worker` reaches PostgreSQL through `testkit.pgproxy`; a `ql control` replica admits
a wave of Runs that all become due at the same second, one per slot of the worker. Every
command writes its start line to the worker bed's ledger, then blocks on a FIFO that the test
holds open: once the wave's Runs are all recorded ``running`` (their ``start`` and
``running`` steps are durable), the only lifecycle steps the worker can still write for them
are their endings. The test waits for a lease renewal to land (so none and no heartbeat is
due for a while: every connection of the worker carries its application name, and the full
slots mean no acquisition), arms DROP_COMMIT for two replies, slows the worker's link a
little and releases every command at once by writing one line per command into the FIFO.
The endings reach the executor's StepBatch together: the first is written alone and the
others, arriving while it commits, as one batch after it (execution/step_batch.py). The
server commits both transactions; their replies never arrive.

Each job in a lost transaction hears OutcomeUnknown for "record attempt steps"
(RunStore.attempt_steps), reports it (QL_OUTCOME_UNKNOWN on the worker's JSON events), waits
PERSIST_RETRY_S and resends its own ending (JobRunner.persist), which is accepted as already
done. Judged afterwards:

- a dropped reply was a transaction's that carried several endings: the worker reported
  more "record attempt steps" outcomes unknown than the proxy dropped replies (each job in
  a lost transaction reports once);
- what committed were the lost transactions' own writes and the resends wrote nothing: as
  many Runs as jobs reported have their ending stamped at least a retry pause before the
  worker reported them finished;
- every Run ended exactly once: one Attempt, succeeded, one ``run.succeeded`` and nothing
  refused (``attempt.late_callback_ignored``), no lifecycle event twice, event sequences
  1..n, one ``finished`` event per Run from the worker, nothing left dispatching or running;
- the worker bed's judge (the commands' ledger, one ending per Run, admission by the
  audit) and the audit's execution checks (E1-E5) find no violation.

Should a dropped reply still hit another transaction (a renewal late by more than the quiet
window), the round proves nothing and another wave is run, up to MAX_ROUNDS.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from qinglong.domain.task import CommandSpec, EnvEntry, ShellCommand
from qinglong.execution.job_runner import PERSIST_RETRY_S
from qinglong.profiles.registration import HEARTBEAT_INTERVAL_S
from qinglong.storage.definitions.params import TaskPublishParams
from testkit.cluster import Worker
from testkit.pgproxy import PgProxy, ProxyMode
from tests.faults.conftest import AUDIT_SETTLE_MS, FaultBed, wait_for
from tests.faults.test_worker_faults import (
    ENDED,
    RENEW_EVERY_MS,
    WORKER_LEASE_MS,
    WorkerBed,
    read_ledger,
    wait_db_time,
)

pytestmark = pytest.mark.slow

WAVE = 6  # Runs due at the same second, one slot each
DROPS_PER_ROUND = 2  # the lone first ending, then the batch of the others
MAX_ROUNDS = 3
QUIET_MS = 1_200  # how long no renewal nor heartbeat is due when the commands are let go
LINK_DELAY_S = 0.02  # added to every reply to the worker while its endings are written
RESENT_BEFORE_MS = int(PERSIST_RETRY_S * 1000) - 100  # (less some scheduling slack)
STEPS_ACTION = "record attempt steps"  # RunStore.attempt_steps's action, in its errors
WORKER_APP = "ql-worker:a"  # the pool; its leases and listen connections share the prefix

# The start line in the bed's ledger format (WorkerBed.judge reads it), then wait for the
# test's go: dash's `read` takes one byte at a time, so each command takes exactly one line.
GATED = """\
line() { echo "$1 $QL_RUN_ID $QL_ATTEMPT_ID $$ $(date +%s%3N) $QL_TRIGGER_ID $QL_ATTEMPT" >> "$LEDGER"; }
line start
read -r go < "$GATE"
line end
"""


@pytest.fixture
def wbed(bed: FaultBed) -> Iterator[WorkerBed]:
    harness = WorkerBed(bed=bed, ledger=bed.tmp / "commands.ledger")
    try:
        yield harness
    finally:
        harness.close()


@dataclass(frozen=True)
class Gate:
    """A FIFO the commands read their go from, held open for reading and writing by the test:
    a command never blocks opening it, and a line written before a command reads it waits.
    Closed at the end, it lets every command still waiting go (they read end of file)."""

    path: Path
    fd: int

    def release(self, commands: int) -> None:
        os.write(self.fd, b"go\n" * commands)


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Gate]:
    path = tmp_path / "gate"
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR)
    try:
        yield Gate(path, fd)
    finally:
        os.close(fd)


def outcome_unknown(worker: Worker) -> list[dict[str, Any]]:
    return [e for e in worker.events()
            if e.get("event") == "error" and e.get("code") == "QL_OUTCOME_UNKNOWN"]


def wave_running(wbed: WorkerBed, triggers: list[str]) -> list[dict[str, Any]] | None:
    """The wave's Runs once each runs on worker a and its command has written its start."""
    runs = [r for r in wbed.runs() if r["trigger_id"] in triggers]
    if len(runs) != len(triggers) or any(r["status"] != "running" for r in runs):
        return None
    attempts = wbed.attempts()
    started = {p.attempt_id for p in read_ledger(wbed.ledger)}
    for run in runs:
        mine = [a for a in attempts if a["run_id"] == run["id"]]
        if len(mine) != 1 or mine[0]["status"] != "running" or mine[0]["id"] not in started:
            return None
        assert str(mine[0]["worker_id"]).startswith("a:"), mine
    return runs


def leases_renewed_at(wbed: WorkerBed, run_ids: list[str]) -> tuple[int, int, int]:
    """When the wave's leases were last extended (a renewal extends them all in one
    statement), when worker a's heartbeat last landed, and now: database time."""
    row = wbed.bed.rows(
        "SELECT (SELECT max(lease_expires_at_ms) FROM qinglong.run_attempts "
        "        WHERE run_id = ANY(%s)) AS expires, "
        "(SELECT seen_at_ms FROM qinglong.instances WHERE instance_id = 'a') AS seen, "
        "(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now", [run_ids])[0]
    return int(row["expires"]) - WORKER_LEASE_MS, int(row["seen"]), int(row["now"])


def quiet(wbed: WorkerBed, run_ids: list[str], after_ms: int) -> bool:
    """A lease renewal landed just now (after ``after_ms``) and the heartbeat lately: neither
    is due for QUIET_MS, so no COMMIT but the endings' can take the replies dropped. The wave
    fills every slot (no acquisition) and its commands print nothing (no log shipping)."""
    renewed, seen, now = leases_renewed_at(wbed, run_ids)
    return (renewed > after_ms and now - renewed <= RENEW_EVERY_MS - QUIET_MS
            and now - seen <= HEARTBEAT_INTERVAL_S * 1000 - QUIET_MS)


def wave_ended(wbed: WorkerBed, triggers: list[str]) -> list[dict[str, Any]] | None:
    runs = [r for r in wbed.runs() if r["trigger_id"] in triggers]
    return runs if len(runs) == len(triggers) and all(r["status"] in ENDED for r in runs) else None


def test_a_lost_commit_reply_on_batched_endings_is_resent_and_accepted_once(
        wbed: WorkerBed, gate: Gate) -> None:
    env = (EnvEntry(name="LEDGER", value=str(wbed.ledger)),
           EnvEntry(name="GATE", value=str(gate.path)))
    wbed.bed.admin.task_publish(TaskPublishParams(
        project_id="demo", task_id="gated", name="gated",
        spec=CommandSpec(command=ShellCommand(command=GATED, shell="/bin/sh"), environment=env)))
    wbed.start_control().wait_ready()
    with PgProxy(wbed.bed.db.server.host, wbed.bed.db.server.port) as proxy:
        url = proxy.route(wbed.bed.db.url("ql_worker"), sslmode="disable", gssencmode="disable")
        a = wbed.worker("a", slots=WAVE, url=url)
        proven: dict[str, Any] | None = None
        rounds: list[dict[str, Any]] = []
        for round_no in range(1, MAX_ROUNDS + 1):
            at = wbed.next_second(2)
            triggers = [f"r{round_no}-{i}" for i in range(WAVE)]
            for trigger in triggers:
                wbed.trigger(trigger, "gated", at_ms=at)
            runs = wait_for(lambda t=triggers: wave_running(wbed, t),  # type: ignore[misc]
                            f"round {round_no}: the wave to run on a", 20)
            for trigger in triggers:  # once a minute: never again within the test
                wbed.disable(trigger)
            ids = [r["id"] for r in runs]
            leased = leases_renewed_at(wbed, ids)[0]
            wait_for(lambda i=ids, after=leased: quiet(wbed, i, after),  # type: ignore[misc]
                     f"round {round_no}: a lease renewal, then no other write due for a while",
                     15, every=0.01)
            seen = len(outcome_unknown(a))
            dropped = proxy.fired["drop_commit"]
            proxy.arm(ProxyMode.DROP_COMMIT, count=DROPS_PER_ROUND, application_name=WORKER_APP)
            # a slower link: the endings that arrive while the first one commits wait for it
            # and go together in the next transaction
            proxy.set_delay(LINK_DELAY_S, application_name=WORKER_APP)
            gate.release(WAVE)  # every command ends now
            wait_for(lambda n=dropped: proxy.fired["drop_commit"]  # type: ignore[misc]
                     >= n + DROPS_PER_ROUND, f"round {round_no}: the COMMIT replies dropped", 15)
            proxy.disarm()
            proxy.set_delay(0)
            ended = wait_for(lambda t=triggers: wave_ended(wbed, t),  # type: ignore[misc]
                             f"round {round_no}: every Run of the wave to end", 20)
            # The Runs end in the database with the lost transactions; the worker reports a
            # Run finished once its resent ending was accepted.
            wait_for(lambda i=set(ids): i <= {e["run_id"] for e in a.events()  # type: ignore[misc]
                                         if e.get("event") == "finished"},
                     f"round {round_no}: the worker to report every Run of the wave finished", 20)
            unknown = outcome_unknown(a)[seen:]
            steps = [e for e in unknown if str(e["message"]).startswith(f"{STEPS_ACTION}:")]
            rounds.append({"round": round_no, "dropped": DROPS_PER_ROUND,
                           "unknown": [e["message"] for e in unknown]})
            # More jobs heard the outcome unknown than replies were dropped: a dropped reply
            # was a transaction's that carried the endings of several Runs.
            if len(steps) > DROPS_PER_ROUND:
                proven = {"round": round_no, "runs": runs, "ended": ended, "steps": steps}
                break
        assert proven is not None, f"no dropped COMMIT reply hit a batch of endings: {rounds}"

        # Only endings were left to write, and no job waited for more than two transactions.
        assert len(proven["steps"]) <= 2 * WAVE, proven["steps"]
        # What committed were the lost transactions' own writes, and the resends wrote nothing:
        # a job resends its ending PERSIST_RETRY_S after hearing the outcome unknown and reports
        # the Run finished once the resend is accepted, so the ending of a Run whose resend was
        # accepted as already done is stamped (database clock, same host) at least that long
        # before its finished event; one the resend wrote would be stamped just before it.
        # Each job that heard the outcome unknown resent once.
        finished = [e for e in a.events() if e.get("event") == "finished"]
        reported = {e["run_id"]: int(e["at_ms"]) for e in finished}
        resent = [r["id"] for r in proven["ended"]
                  if reported[r["id"]] - r["finished_at_ms"] >= RESENT_BEFORE_MS]
        assert len(resent) == len(proven["steps"]), (
            [(r["id"], r["finished_at_ms"], reported[r["id"]]) for r in proven["ended"]],
            [e["at_ms"] for e in proven["steps"]])

        # Every Run the worker took ended exactly once.
        for run in wbed.runs():
            assert run["status"] == "succeeded", run
            attempts = wbed.attempts(run["id"])
            assert [(x["attempt"], x["status"], x["exit_code"]) for x in attempts] == [
                (1, "succeeded", 0)], attempts
            events = wbed.events(run["id"])
            sequences = [e["sequence"] for e in events]
            assert sequences == list(range(1, len(events) + 1)), sequences
            types = [e["type"] for e in events]
            assert types.count("run.succeeded") == 1, types
            assert "attempt.late_callback_ignored" not in types, types
            assert len(types) == len(set(types)), types  # no lifecycle event written twice
            mine = [e for e in finished if e["run_id"] == run["id"]]
            assert [e["status"] for e in mine] == ["succeeded"], mine
        assert len(finished) == len(wbed.runs()) == WAVE * len(rounds)
        assert a.process is not None and a.process.poll() is None
    # the commands' ledger, one ending per Run, nothing active; `ql audit` for admission and
    # execution, once the last wave is older than the audit's settle time (so it is required)
    wait_db_time(wbed, at + AUDIT_SETTLE_MS + 250,
                 "the last wave to be older than the audit's settle time")
    wbed.judge()
    report = wbed.bed.audit(wbed.start_ms)
    assert report.execution is not None and report.execution.violations == 0, (
        report.execution.findings() if report.execution else None)
    assert report.execution.ended == WAVE * len(rounds)
