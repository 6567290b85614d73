"""What a flow run is, as the stores read it back: the run and the step of each node."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from qinglong.domain.flow_progress import FlowStatus, NodeState
from qinglong.domain.identifiers import entity_id, project_id
from qinglong.domain.manual import actor_name, request_id


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowStep:
    node_id: str
    state: NodeState
    run_id: str | None  # the Run it was released as
    run_status: str | None  # that Run's status now
    cancel_requested: bool = False
    released_at_ms: int | None = None
    ended_at_ms: int | None = None
    error: str | None = None  # why it was skipped without running, when it could not be


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowRun:
    id: str
    project_id: str
    flow_id: str
    flow_revision: int
    status: FlowStatus
    ended_reason: str | None  # nodes, cancelled or timeout
    request_key: str
    requested_by: str
    parameters: Mapping[str, object] = field(default_factory=dict)
    created_at_ms: int
    deadline_at_ms: int | None = None
    finished_at_ms: int | None = None
    trigger_id: str | None = None  # the trigger whose occurrence started it (None: a request)
    scheduled_for_ms: int | None = None  # that occurrence
    steps: tuple[FlowStep, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowStart:
    """What `ql flow run` asks: start the current revision of a flow once per request id."""

    project_id: str
    flow_id: str
    request_id: str
    actor: str
    parameters: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        project_id(self.project_id)
        entity_id(self.flow_id, "flow")
        request_id(self.request_id)
        actor_name(self.actor)


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowOccurrence:
    """What a trigger of a flow asks when one of its occurrences is admitted: start the
    flow's current revision once for that occurrence, in the admitting transaction."""

    project_id: str
    flow_id: str
    trigger_id: str
    trigger_revision: int
    scheduled_for_ms: int
    claim_version: int
    claim_token: str
    actor: str  # the replica that admits it
    parameters: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FlowStarted:
    flow_run_id: str
    started: bool  # False: the request id had started it before
    in_doubt: bool = False  # the COMMIT reply was lost and a lookup found it

    @property
    def admitted(self) -> bool:
        return self.started
