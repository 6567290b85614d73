"""The storage ports: Protocols the scheduler, executor and CLI need, with their params.

Each operation takes one params dataclass named after it. The contract tests run
the same cases against every adapter that implements a port.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from qinglong.domain.admission import AdmissionIds
from qinglong.domain.backfill import BackfillRequest, BackfillTarget
from qinglong.domain.decision import Decision, Disposition
from qinglong.domain.lifecycle import LeaseFence, Outcome
from qinglong.domain.manual import ManualRequest
from qinglong.domain.model import LedgerFacts, Project, Run, RunDetail, TaskView, TriggerView
from qinglong.domain.runs import RunStatus
from qinglong.domain.schedule import ScheduleCandidate, ScheduleClaim
from qinglong.domain.task import CommandSpec, ExecutionRevision, TaskRevision
from qinglong.domain.trigger import Overlap, TriggerRevision
from qinglong.errors import QinglongError

# --- definitions ---------------------------------------------------------------------


# --- runs ----------------------------------------------------------------------------


# --- process heartbeats --------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Instance:
    """A process that serves the database: a `ql serve`, a `ql control` replica, a worker."""

    instance_id: str
    role: str  # serve | control | worker | web
    host: str
    pid: int
    started_at_ms: int
    seen_at_ms: int
    stopped_at_ms: int | None


class InstanceStore(Protocol):
    """Heartbeats, in the store's clock: ``instance_start`` (re)registers a process,
    ``instance_beat`` says it is alive, ``instance_stop`` that it stopped cleanly."""

    def instance_start(self, instance_id: str, role: str, host: str, pid: int) -> None: ...
    def instance_beat(self, instance_id: str) -> None: ...
    def instance_stop(self, instance_id: str) -> None: ...
    def instance_list(self) -> list[Instance]: ...


