"""How a flow run moves on: from the state of each node, which nodes are released now,
which will never run (skipped), and whether the flow run has ended and how.

Pure: the store calls `advance` in the transaction that records a node's outcome (the same
one that ends its Run), so what it releases is admitted exactly once.

An edge into a pending node is *satisfied* when its upstream node ended and its condition
holds for that ending, *dead* when it never will be (the upstream node was skipped, ended
the other way, or -- under the ``stop`` policy once any node failed -- it is a ``success``
edge), and *open* while the upstream node has not ended. A node joining ``all`` is released
when every edge is satisfied and skipped when one is dead; joining ``any``, released when
one is satisfied and skipped when all are dead. The flow run ends when no node is pending
or running: failed if any node failed, succeeded otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from qinglong.domain.flow import Condition, Edge, FailurePolicy, FlowSpec, Join
from qinglong.domain.runs import RunStatus


class NodeState(StrEnum):
    PENDING = "pending"  # not released yet
    RELEASED = "released"  # its Run is admitted and has not ended
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # its Run ended otherwise: failed, timed out, lost or cancelled
    SKIPPED = "skipped"  # it will never run in this flow run


ENDED_NODE = frozenset({NodeState.SUCCEEDED, NodeState.FAILED, NodeState.SKIPPED})


class FlowStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


ENDED_FLOW = frozenset({FlowStatus.SUCCEEDED, FlowStatus.FAILED, FlowStatus.CANCELLED})


def node_outcome(status: RunStatus) -> NodeState:
    """What a node's ended Run makes of the node."""
    return NodeState.SUCCEEDED if status is RunStatus.SUCCEEDED else NodeState.FAILED


@dataclass(frozen=True, slots=True)
class Progress:
    release: tuple[str, ...]  # nodes to admit now, in id order
    skip: tuple[str, ...]  # nodes that will never run, in id order
    ended: FlowStatus | None  # the flow run's ending, None while it goes on


def edge_state(edge: Edge, states: Mapping[str, NodeState], stopped: bool) -> bool | None:
    """True: satisfied, False: dead, None: open."""
    upstream = states[edge.upstream]
    if upstream is NodeState.SKIPPED:
        return False
    if upstream is NodeState.SUCCEEDED:
        if edge.condition is Condition.FAILURE:
            return False
        return not (stopped and edge.condition is Condition.SUCCESS)
    if upstream is NodeState.FAILED:
        return edge.condition is not Condition.SUCCESS
    return None


def advance(spec: FlowSpec, states: Mapping[str, NodeState]) -> Progress:
    """The nodes released and skipped now, given every node's state, and the flow run's
    ending once nothing can happen any more."""
    current = dict(states)
    missing = {n.node_id for n in spec.nodes} - set(current)
    if missing:
        raise KeyError(f"no state for node {min(missing)}")
    stopped = spec.failure is FailurePolicy.STOP and NodeState.FAILED in current.values()
    release: list[str] = []
    skip: list[str] = []
    changed = True
    while changed:  # a skip can decide the nodes after it: go round until nothing moves
        changed = False
        for node in spec.nodes:
            if current[node.node_id] is not NodeState.PENDING:
                continue
            edges = [edge_state(e, current, stopped) for e in node.after]
            if node.root:  # it comes after nothing: it starts with the flow run
                ready, dead = True, False
            elif node.join is Join.ALL:
                ready, dead = all(e is True for e in edges), any(e is False for e in edges)
            else:
                ready, dead = any(e is True for e in edges), all(e is False for e in edges)
            if ready:
                current[node.node_id] = NodeState.RELEASED
                release.append(node.node_id)
                changed = True
            elif dead:
                current[node.node_id] = NodeState.SKIPPED
                skip.append(node.node_id)
                changed = True
    ended = None
    if all(state in ENDED_NODE for state in current.values()):
        ended = (FlowStatus.FAILED if NodeState.FAILED in current.values()
                 else FlowStatus.SUCCEEDED)
    return Progress(release=tuple(sorted(release)), skip=tuple(sorted(skip)), ended=ended)

