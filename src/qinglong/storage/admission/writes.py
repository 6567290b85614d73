"""The one admission writer: every Run comes into being here.

A scheduled occurrence, a manual Run and a backfilled occurrence all write the rows
``domain/admission.py`` builds (the queued Run, its first Attempt, ``run.created`` and
``run.queued``) with ``insert_admission``. A scheduled admission also moves its schedule row
under the claim's full fence and records what a misfire dropped or a pause held back
(``misfire_record``); ``Writes`` collects those of a batch and ``Writes.apply`` writes them:

- with one set-based statement (``schedule_admit_batch``) where the dialect has one
  (``Capabilities.set_based_writes``: PostgreSQL): the rows advanced come back, and the
  Runs, Attempts, events and misfire records of exactly those rows are inserted;
- otherwise row by row with the same effect: each schedule row is advanced under its fence
  (``schedule_advance_fenced``), and only a row that advanced gets its other rows.

Either way a row whose fence no longer holds writes nothing and is reported as not done.

An occurrence of a trigger that starts a flow is admitted as a flow run instead of a Run: its
schedule row moves like any other (as a row that admits nothing), and only if it moved is the
flow started, in the same transaction (``FlowStarter``: storage/flows/start.py, given by the
schedule store's owner), under the occurrence's key, with the claim as its evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from qinglong.domain.admission import AdmissionRows
from qinglong.domain.decision import PAUSED_FATE, Decision, Disposition
from qinglong.domain.flow_runs import FlowOccurrence
from qinglong.domain.occurrences import cursor_for_storage
from qinglong.domain.schedule import ScheduleClaim
from qinglong.errors import StorageError
from qinglong.storage.admission.params import CommitOutcome, CommitResult
from qinglong.storage.events import insert_events, json_rows
from qinglong.storage.kernel import Tx

Key = tuple[str, str]  # (project_id, trigger_id)
# Starts the flow of one occurrence in the admitting transaction, as the flow run of this id.
FlowStarter = Callable[[Tx, FlowOccurrence, str], object]

# The columns of each row the set-based statement takes, in the order of its JSON arrays
# (postgres/queries/admission_batch.sql, schedule_admit_batch; a test compares them). A
# move carries the lists of the rows its schedule row writes if it advances (NESTED).
MOVE_COLUMNS = ("row_locator", "project_id", "trigger_id", "trigger_revision", "state_version",
                "cursor_ms", "claim_owner", "claim_token", "claim_version",
                "claim_expires_at_ms", "next_fire_at_ms", "next_due_at_ms", "scheduled_for_ms")
NESTED = ("misfires", "runs", "attempts", "events")
RUN_COLUMNS = ("id", "project_id", "task_id", "task_revision", "task_name", "task_snapshot_ref",
               "trigger_id", "trigger_revision", "trigger_type", "execution_origin",
               "execution_owner", "triggered_by", "scheduled_for_ms", "status", "version",
               "event_sequence", "priority", "idempotency_key", "created_at_ms", "queued_at_ms",
               "overlap_policy", "overlap_key", "overlap_queue_limit", "requires",
               "parameters")
ATTEMPT_COLUMNS = ("id", "run_id", "attempt", "status", "executor_type", "callback_sequence",
                   "created_at_ms")
EVENT_COLUMNS = ("id", "run_id", "sequence", "type", "dedupe_key", "actor_type", "actor_id",
                 "attempt_id", "payload", "created_at_ms")
MISFIRE_COLUMNS = ("project_id", "trigger_id", "trigger_revision", "due_at_ms",
                   "skipped_through_ms", "next_fire_at_ms", "policy", "run_id", "claim_version",
                   "decided_at_ms")


def insert_admission(tx: Tx, rows: AdmissionRows) -> None:
    """Insert an admitted Run, its first Attempt and its two events: the step that creates
    a Run (in the caller's transaction)."""
    tx.execute("run_insert", rows.run)
    tx.execute("attempt_insert", rows.attempt)
    insert_events(tx, rows.events)


def insert_admissions(tx: Tx, admissions: Sequence[AdmissionRows]) -> None:
    """``insert_admission`` for the many Runs of a batch written row by row (SQLite): the
    Runs, then their Attempts, then all their events, a call each whatever their number."""
    tx.execute_many("run_insert", [rows.run for rows in admissions])
    tx.execute_many("attempt_insert", [rows.attempt for rows in admissions])
    insert_events(tx, [event for rows in admissions for event in rows.events])


def misfire_record(claim: ScheduleClaim, decision: Decision,
                   run_id: str | None) -> list[dict[str, object]]:
    """What a decision records beside its move: the stretch a pause held back, and the
    stretch a misfire dropped (with the Run it admitted instead, under ``fire_once``)."""
    candidate, fence = claim.candidate, claim.fence
    base = {"project_id": candidate.project_id, "trigger_id": candidate.trigger_id,
            "trigger_revision": candidate.trigger_revision, "claim_version": fence.version,
            "decided_at_ms": decision.observed_at_ms}
    records_: list[dict[str, object]] = []
    if decision.paused_from_ms is not None:
        records_.append({**base, "due_at_ms": decision.paused_from_ms,
                         "skipped_through_ms": decision.paused_through_ms,
                         "next_fire_at_ms": decision.due_at_ms, "policy": PAUSED_FATE,
                         "run_id": None})
    if decision.misfired:
        records_.append({**base, "due_at_ms": decision.due_at_ms,
                         "skipped_through_ms": decision.skipped_through_ms,
                         "next_fire_at_ms": cursor_for_storage(decision.next_fire_at_ms),
                         "policy": candidate.spec.misfire_policy.value, "run_id": run_id})
    return records_


@dataclass(frozen=True, slots=True)
class Planned:
    """Everything one claimed row writes if its fence still holds."""

    key: Key
    move: dict[str, object]
    admission: AdmissionRows | None
    misfires: list[dict[str, object]]
    result: CommitResult
    flow: FlowOccurrence | None = None  # the flow the occurrence starts instead of a Run


@dataclass(slots=True)
class Writes:
    """The writes of a batch of claimed rows, by the index of each row in the batch."""

    planned: dict[int, Planned] = field(default_factory=dict)
    start_flow: FlowStarter | None = None

    def add(self, index: int, claim: ScheduleClaim, decision: Decision,
            admission: AdmissionRows | None, *, now_ms: int,
            flow: tuple[FlowOccurrence, str] | None = None) -> None:
        """Plan one row's writes: ``admission`` its Run's rows, or ``flow`` the flow its
        occurrence starts with the flow run's id (or neither: the row only moves)."""
        candidate, fence = claim.candidate, claim.fence
        run_id = admission.run["id"] if admission is not None else None
        move: dict[str, object] = {
            "row_locator": claim.row_locator, "project_id": candidate.project_id,
            "trigger_id": candidate.trigger_id, "trigger_revision": candidate.trigger_revision,
            "state_version": candidate.state_version, "cursor_ms": candidate.next_fire_at_ms,
            "claim_owner": fence.owner, "claim_token": fence.token,
            "claim_version": fence.version, "claim_expires_at_ms": fence.expires_at_ms,
            "next_fire_at_ms": cursor_for_storage(decision.next_fire_at_ms),
            "next_due_at_ms": decision.next_due_at_ms,
            "scheduled_for_ms": decision.scheduled_for_ms, "now_ms": now_ms,
        }
        if admission is not None:
            assert isinstance(run_id, str)
            result = CommitResult(outcome=CommitOutcome.ADMITTED,
                                  disposition=decision.disposition, run_id=run_id,
                                  attempt_id=str(admission.attempt["id"]))
        elif flow is not None:  # admitted as a flow run (its id stands for the occurrence)
            run_id = flow[1]
            result = CommitResult(outcome=CommitOutcome.ADMITTED,
                                  disposition=decision.disposition, flow_run_id=flow[1])
        else:
            assert decision.disposition is not Disposition.ADMIT
            result = CommitResult(outcome=CommitOutcome.ADVANCED, disposition=decision.disposition)
        self.planned[index] = Planned(
            key=(candidate.project_id, candidate.trigger_id), move=move, admission=admission,
            misfires=misfire_record(claim, decision, run_id if isinstance(run_id, str) else None),
            result=result, flow=flow[0] if flow is not None else None)

    def apply(self, tx: Tx, *, now_ms: int) -> set[Key]:
        """Write every planned row whose fence still holds; the keys of those written."""
        if not self.planned:
            return set()
        done = (self._apply_set_based(tx, now_ms) if tx.capabilities.set_based_writes
                else self._apply_rows(tx))
        for planned in self.planned.values():
            if planned.flow is not None and planned.key in done:
                if self.start_flow is None:
                    raise StorageError("admit occurrences: this scheduler cannot start flows")
                assert planned.result.flow_run_id is not None
                self.start_flow(tx, planned.flow, planned.result.flow_run_id)
        return done

    def _apply_rows(self, tx: Tx) -> set[Key]:
        done: set[Key] = set()
        admissions: list[AdmissionRows] = []
        misfires: list[dict[str, object]] = []
        for planned in self.planned.values():
            if tx.execute("schedule_advance_fenced", planned.move).rowcount != 1:
                continue  # taken over, reset, paused: this row writes nothing
            done.add(planned.key)
            if planned.admission is not None:
                admissions.append(planned.admission)
            misfires.extend(planned.misfires)
        # the other rows of the rows advanced, each kind in one call
        insert_admissions(tx, admissions)
        tx.execute_many("schedule_misfire_insert", misfires)
        return done

    def _apply_set_based(self, tx: Tx, now_ms: int) -> set[Key]:
        moves: list[list[object]] = []
        for planned in self.planned.values():
            rows = planned.admission
            nested: dict[str, list[list[object]]] = {
                "misfires": [[misfire[name] for name in MISFIRE_COLUMNS]
                             for misfire in planned.misfires],
                "runs": [] if rows is None else [[rows.run[name] for name in RUN_COLUMNS]],
                "attempts": [] if rows is None else [
                    [rows.attempt[name] for name in ATTEMPT_COLUMNS]],
                "events": [] if rows is None else [
                    [event[name] for name in EVENT_COLUMNS] for event in rows.events],
            }
            moves.append([*(planned.move[name] for name in MOVE_COLUMNS),
                          *(nested[name] for name in NESTED)])
        advanced = tx.all("schedule_admit_batch", {
            "now_ms": now_ms, "row_locators": [move[0] for move in moves],
            "moves": json_rows(moves),
        })
        done = {(row["project_id"], row["trigger_id"]) for row in advanced}
        if advanced and (int(advanced[0]["runs"]), int(advanced[0]["attempts"]),
                         int(advanced[0]["events"]),
                         int(advanced[0]["misfires"])) != self._shape(done):
            raise StorageError("admit occurrences: the batch did not write the shape it planned")
        return done

    def _shape(self, done: set[Key]) -> tuple[int, int, int, int]:
        """Runs, Attempts, events and misfire rows the rows in ``done`` write."""
        runs = events = misfires = 0
        for planned in self.planned.values():
            if planned.key in done:
                if planned.admission is not None:
                    runs += 1
                    events += len(planned.admission.events)
                misfires += len(planned.misfires)
        return runs, runs, events, misfires
