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


# A registration whose heartbeat is this old (in the store's clock) and that never stopped
# cleanly belongs to a process taken for dead (a crash): its id may be registered again.
INSTANCE_STALE_MS = 30_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Registration:
    """This process's hold on an instance id: what its heartbeats and its stop are fenced by."""

    instance_id: str
    host: str
    pid: int
    started_at_ms: int


class InstanceStore(Protocol):
    """Heartbeats, in the store's clock. An instance id is held by one live process at a time.

    ``instance_start`` registers this process under an id that is new, stopped cleanly, silent
    for INSTANCE_STALE_MS (its holder crashed), or this process's own earlier registration
    (``resume``, after losing the database); ``locked`` (the caller holds a lock proving no other
    process of its role runs, as `ql serve` does) also takes over a registration of the same
    role. Otherwise it raises InstanceHeld. ``instance_beat`` (False when this process no longer
    holds the id) and ``instance_stop`` touch only the registration this store made."""

    def instance_start(self, instance_id: str, role: str, host: str, pid: int, *,
                       resume: Registration | None = None,
                       locked: bool = False) -> Registration: ...
    def instance_beat(self, instance_id: str) -> bool: ...
    def instance_stop(self, instance_id: str) -> None: ...
    def instance_list(self) -> list[Instance]: ...


