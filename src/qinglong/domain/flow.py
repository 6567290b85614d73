"""Flows: a versioned graph of a project's tasks (issue 21, docs/controls/flows.md).

A flow is a set of nodes, each running one task. A node lists the nodes it comes ``after``,
each with a condition (``success``, ``failure`` or ``always``) and joins them with ``all``
(every edge must be satisfied) or ``any`` (one is enough). Nodes that come after nothing are
the roots: a flow run starts them all. The failure policy says what one failed node does to
the rest: ``stop`` (no ``success`` edge is followed any more; ``failure`` and ``always``
edges still are) or ``continue`` (independent branches go on). An optional timeout ends
the flow run, cancelling what still runs.

This module parses and checks a flow (ids, known edges, no cycle), and gives its canonical
content, whose digest pins a flow revision. Which tasks the nodes run, and which revision
of each, is pinned by the store when the flow is published.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from qinglong.domain.canonical import content_digest
from qinglong.domain.durations import format_duration, parse_duration_ms
from qinglong.domain.identifiers import entity_id
from qinglong.errors import InvalidInput

FLOW_DIGEST_PREFIX = "qinglong/flow@v1"
MAX_NODES = 200
E = TypeVar("E", bound=StrEnum)
MAX_TIMEOUT_MS = 30 * 24 * 3_600_000  # a month


class Condition(StrEnum):
    SUCCESS = "success"  # the upstream node's Run succeeded
    FAILURE = "failure"  # it ended any other way (failed, timed out, lost, cancelled)
    ALWAYS = "always"  # it ended, whatever the outcome


class Join(StrEnum):
    ALL = "all"  # every edge in is satisfied (fan-in)
    ANY = "any"  # one edge in is satisfied


class FailurePolicy(StrEnum):
    STOP = "stop"  # after a failure, only failure and always edges are followed
    CONTINUE = "continue"  # independent branches finish


@dataclass(frozen=True, slots=True)
class Edge:
    upstream: str
    condition: Condition = Condition.SUCCESS


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowNode:
    node_id: str
    task_id: str
    after: tuple[Edge, ...] = ()
    join: Join = Join.ALL
    parameters: Mapping[str, object] = field(default_factory=dict)  # values for the task's

    @property
    def root(self) -> bool:
        return not self.after


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowSpec:
    nodes: tuple[FlowNode, ...]
    failure: FailurePolicy = FailurePolicy.STOP
    timeout_ms: int | None = None

    def __post_init__(self) -> None:
        check_graph(self.nodes)
        if self.timeout_ms is not None and not 1000 <= self.timeout_ms <= MAX_TIMEOUT_MS:
            raise InvalidInput("timeout", "must be between 1s and 30d")

    def node(self, node_id: str) -> FlowNode:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(node_id)

    @property
    def roots(self) -> tuple[str, ...]:
        return tuple(n.node_id for n in self.nodes if n.root)

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(sorted({n.task_id for n in self.nodes}))

    def content(self) -> dict[str, object]:
        """The canonical content (what the digest covers), nodes in id order."""
        out: dict[str, object] = {
            "failure": self.failure.value,
            "nodes": [_node_content(n) for n in sorted(self.nodes, key=lambda n: n.node_id)],
        }
        if self.timeout_ms is not None:
            out["timeout_ms"] = self.timeout_ms
        return out

    def digest(self, *, flow_id: str, name: str, pins: Mapping[str, TaskPin]) -> str:
        """The digest of a revision: this content, the flow's id and name, and the revision
        of each task it pins."""
        return content_digest(FLOW_DIGEST_PREFIX, {
            "flow_id": flow_id, "name": name, "spec": self.content(),
            "pins": pins_content(pins)})

    def describe_timeout(self) -> str | None:
        return None if self.timeout_ms is None else format_duration(self.timeout_ms)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskPin:
    """The revision of a task a flow revision runs (pinned when it was published)."""

    revision: int
    digest: str  # the task revision's content digest
    name: str


def pins_content(pins: Mapping[str, TaskPin]) -> dict[str, object]:
    return {task_id: {"revision": p.revision, "digest": p.digest, "name": p.name}
            for task_id, p in sorted(pins.items())}


def pins_from_content(content: Mapping[str, object]) -> dict[str, TaskPin]:
    out = {}
    for task_id, value in content.items():
        if not isinstance(value, Mapping):
            raise InvalidInput("pins", "a stored pin is a mapping")
        out[task_id] = TaskPin(revision=int(value["revision"]), digest=str(value["digest"]),
                               name=str(value["name"]))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowRevision:
    """One immutable revision of a flow: its graph and the task revisions it runs."""

    project_id: str
    flow_id: str
    revision: int
    name: str
    spec: FlowSpec
    pins: Mapping[str, TaskPin]
    content_digest: str
    created_at_ms: int

    def expected_digest(self) -> str:
        return self.spec.digest(flow_id=self.flow_id, name=self.name, pins=self.pins)


def _node_content(node: FlowNode) -> dict[str, object]:
    out: dict[str, object] = {"id": node.node_id, "task": node.task_id}
    if node.after:
        out["after"] = [{"node": e.upstream, "on": e.condition.value}
                        for e in sorted(node.after, key=lambda e: e.upstream)]
        out["join"] = node.join.value
    if node.parameters:
        out["parameters"] = dict(node.parameters)
    return out


def check_graph(nodes: Sequence[FlowNode]) -> None:
    """Refuse a graph that is empty, too big, has two nodes of one id, an edge to an unknown
    node, two edges from one node into another, or a cycle (named in the error)."""
    if not nodes:
        raise InvalidInput("nodes", "a flow needs at least one node")
    if len(nodes) > MAX_NODES:
        raise InvalidInput("nodes", f"at most {MAX_NODES} nodes")
    ids = [n.node_id for n in nodes]
    seen: set[str] = set()
    for node_id in ids:
        if node_id in seen:
            raise InvalidInput(f"nodes.{node_id}", "two nodes have this id")
        seen.add(node_id)
    for node in nodes:
        upstream = [e.upstream for e in node.after]
        for name in upstream:
            if name not in seen:
                raise InvalidInput(f"nodes.{node.node_id}.after",
                                   f"names {name!r}, which is not a node of this flow")
            if name == node.node_id:
                raise InvalidInput(f"nodes.{node.node_id}.after", "a node cannot follow itself")
        if len(set(upstream)) != len(upstream):
            raise InvalidInput(f"nodes.{node.node_id}.after", "names one node twice")
    cycle = find_cycle(nodes)
    if cycle:
        raise InvalidInput("nodes", "the graph has a cycle: " + " -> ".join(cycle))


def find_cycle(nodes: Sequence[FlowNode]) -> list[str]:
    """A cycle of the graph as node ids (first repeated at the end), [] when it has none."""
    after = {n.node_id: [e.upstream for e in n.after] for n in nodes}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node_id: str) -> list[str]:
        state[node_id] = 1
        path.append(node_id)
        for upstream in sorted(after.get(node_id, ())):
            if state.get(upstream) == 1:
                cycle = [*path[path.index(upstream):], upstream]
                return list(reversed(cycle))
            if upstream not in state:
                found = visit(upstream)
                if found:
                    return found
        path.pop()
        state[node_id] = 2
        return []

    for node_id in sorted(after):
        if node_id not in state:
            found = visit(node_id)
            if found:
                return found
    return []


def downstream(spec: FlowSpec) -> dict[str, tuple[str, ...]]:
    """For each node, the nodes that come directly after it."""
    out: dict[str, list[str]] = {n.node_id: [] for n in spec.nodes}
    for node in spec.nodes:
        for edge in node.after:
            out[edge.upstream].append(node.node_id)
    return {k: tuple(sorted(v)) for k, v in out.items()}


# -- parsing a document (YAML or JSON, already loaded) ---------------------------------

FLOW_KEYS = frozenset({"flow", "name", "project", "failure", "timeout", "nodes"})
NODE_KEYS = frozenset({"task", "after", "join", "parameters"})


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowDocument:
    flow_id: str
    name: str
    project_id: str | None
    spec: FlowSpec


def _choice(value: object, kind: type[E], where: str) -> E:
    if isinstance(value, str):
        try:
            return kind(value)
        except ValueError:
            pass
    choices = ", ".join(m.value for m in kind)
    raise InvalidInput(where, f"must be one of {choices}, not {value!r}")


def _edges(value: object, where: str) -> tuple[Edge, ...]:
    """``after``: a node id, a list of node ids (each on success), or a mapping of node id to
    condition."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise InvalidInput(where, "must list node ids")
        return tuple(Edge(v) for v in value)
    if isinstance(value, Mapping):
        return tuple(Edge(str(k), _choice(v, Condition, f"{where}.{k}"))
                     for k, v in value.items())
    raise InvalidInput(where, "must be a node id, a list of node ids, or a mapping of node id "
                              "to success, failure or always")


def parse_node(node_id: object, value: object) -> FlowNode:
    where = f"nodes.{node_id}"
    if not isinstance(node_id, str):
        raise InvalidInput("nodes", "node ids must be text")
    entity_id(node_id, where)
    if isinstance(value, str):
        value = {"task": value}
    if not isinstance(value, Mapping):
        raise InvalidInput(where, "must be a task id or a mapping with task, after, join, "
                                  "parameters")
    unknown = sorted(set(value) - NODE_KEYS)
    if unknown:
        raise InvalidInput(f"{where}.{unknown[0]}", "is not a node field (task, after, join, "
                                                    "parameters)")
    task = value.get("task")
    if not isinstance(task, str):
        raise InvalidInput(f"{where}.task", "is required: the id of the task this node runs")
    entity_id(task, f"{where}.task")
    after = _edges(value.get("after") or [], f"{where}.after")  # (null: after nothing)
    join = _choice(value.get("join", "all"), Join, f"{where}.join")
    if "join" in value and not after:
        raise InvalidInput(f"{where}.join", "only a node that comes after others joins them")
    parameters = value.get("parameters", {})
    if not isinstance(parameters, Mapping) or not all(isinstance(k, str) for k in parameters):
        raise InvalidInput(f"{where}.parameters", "must map parameter names to values")
    return FlowNode(node_id=node_id, task_id=task, after=after, join=join,
                    parameters=dict(parameters))


def parse_flow(document: object, *, flow_id: str | None = None) -> FlowDocument:
    """A flow document (a mapping from YAML or JSON): ``flow`` (its id, or ``flow_id``),
    ``name``, ``project``, ``failure``, ``timeout`` and ``nodes`` (node id -> task id, or a
    mapping with ``task``, ``after``, ``join``, ``parameters``)."""
    if not isinstance(document, Mapping):
        raise InvalidInput("flow", "a flow document is a mapping (flow, nodes, ...)")
    unknown = sorted(set(document) - FLOW_KEYS)
    if unknown:
        raise InvalidInput(unknown[0], "is not a flow field (flow, name, project, failure, "
                                       "timeout, nodes)")
    given = document.get("flow", flow_id)
    if not isinstance(given, str):
        raise InvalidInput("flow", "is required: the flow's id")
    if flow_id is not None and given != flow_id:
        raise InvalidInput("flow", f"the document is flow {given!r}, not {flow_id!r}")
    entity_id(given, "flow")
    name = document.get("name", given)
    if not isinstance(name, str) or not 1 <= len(name) <= 255 or name != name.strip():
        raise InvalidInput("name", "must be 1-255 characters without outer white space")
    project = document.get("project")
    if project is not None and not isinstance(project, str):
        raise InvalidInput("project", "must be a project id")
    nodes = document.get("nodes")
    if not isinstance(nodes, Mapping):
        raise InvalidInput("nodes", "is required: a mapping of node id to its task")
    timeout = document.get("timeout")
    timeout_ms = None
    if timeout is not None:
        if not isinstance(timeout, str):
            raise InvalidInput("timeout", "must be a duration such as 30m or 2h")
        try:
            timeout_ms = parse_duration_ms(timeout)
        except ValueError as exc:
            raise InvalidInput("timeout", str(exc)) from None
    failure = _choice(document.get("failure", "stop"), FailurePolicy, "failure")
    spec = FlowSpec(nodes=tuple(parse_node(k, v) for k, v in nodes.items()), failure=failure,
                    timeout_ms=timeout_ms)
    return FlowDocument(flow_id=given, name=name, project_id=project, spec=spec)


def spec_from_content(content: Mapping[str, object]) -> FlowSpec:
    """The spec a stored revision holds (its canonical content)."""
    nodes = content.get("nodes")
    if not isinstance(nodes, list):
        raise InvalidInput("nodes", "a stored flow holds a node list")
    parsed = []
    for item in nodes:
        if not isinstance(item, Mapping):
            raise InvalidInput("nodes", "a stored node is a mapping")
        after = tuple(Edge(str(e["node"]), Condition(e["on"])) for e in item.get("after", []))
        params = item.get("parameters", {})
        parsed.append(FlowNode(node_id=str(item["id"]), task_id=str(item["task"]), after=after,
                               join=Join(item.get("join", "all")),
                               parameters=dict(params) if isinstance(params, Mapping) else {}))
    timeout = content.get("timeout_ms")
    return FlowSpec(nodes=tuple(parsed), failure=FailurePolicy(str(content.get("failure", "stop"))),
                    timeout_ms=int(timeout) if isinstance(timeout, int) else None)


FLOW_KEY_PREFIX = "ql3:flow:v1:"


def flow_idempotency_key(request_id: str) -> str:
    """The unique key (within a project) of the flow run one client request starts."""
    return FLOW_KEY_PREFIX + request_id


def flow_request_id(key: str) -> str:
    """The client request id a flow run's key was made of."""
    return key.removeprefix(FLOW_KEY_PREFIX)


def occurrence_flow_key(trigger_id: str, trigger_revision: int, scheduled_for_ms: int) -> str:
    """The unique key (within a project) of the flow run one occurrence of a flow trigger
    starts: like a Run's cron key, one per occurrence of a trigger revision."""
    return f"ql3:flow-cron:v1:{trigger_id}:{trigger_revision}:{scheduled_for_ms}"


def step_idempotency_key(flow_run_id: str, node_id: str) -> str:
    """The unique key (within a project) of the Run a node of a flow run is released as."""
    return f"ql3:flow-step:v1:{flow_run_id}:{node_id}"
