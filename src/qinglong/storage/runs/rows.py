"""A Run's and an Attempt's lifecycle state, read from a row of the run store's queries."""

from __future__ import annotations

from qinglong.domain.lifecycle import AttemptState, RunState
from qinglong.domain.runs import AttemptStatus, RunStatus
from qinglong.storage.dbapi import Row


def run_state(row: Row, *, id_column: str = "id", status_column: str = "status") -> RunState:
    return RunState(id=row[id_column], status=RunStatus(row[status_column]),
                    version=int(row["version"]), event_sequence=int(row["event_sequence"]),
                    attempts_spent=int(row["attempts_spent"]),
                    cancel_requested=bool(row["cancel_requested"]),
                    cancel_reason=row["cancel_reason"])


def run_from_candidate(row: Row) -> RunState:
    return run_state(row, id_column="run_id", status_column="run_status")


def attempt_state(row: Row, *, id_column: str = "id", status_column: str = "status") -> AttemptState:
    expires = row["lease_expires_at_ms"]
    return AttemptState(
        id=row[id_column], run_id=row["run_id"], attempt=int(row["attempt"]),
        status=AttemptStatus(row[status_column]), executor_type=row["executor_type"],
        lease_owner=row["worker_id"], lease_generation=int(row["lease_generation"]),
        lease_token_digest=row["lease_token_digest"],
        lease_expires_at_ms=None if expires is None else int(expires),
        pid=row["pid"], executor_handle=row["executor_handle"],
    )
