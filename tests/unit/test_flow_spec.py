"""Flow documents (domain/flow.py) and how a flow run moves on (domain/flow_progress.py):
parsing and its refusals, the canonical content and digest, and -- over generated graphs and
outcomes -- that a node is released only when its edges say so, at most once, and that every
flow run ends with every node decided."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qinglong.domain.flow import (
    Condition,
    Edge,
    FailurePolicy,
    FlowNode,
    FlowSpec,
    Join,
    TaskPin,
    parse_flow,
    spec_from_content,
)
from qinglong.domain.flow_progress import ENDED_NODE, FlowStatus, NodeState, advance
from qinglong.errors import InvalidInput

PINS = {"t": TaskPin(revision=1, digest="a" * 64, name="t")}


def spec(document: dict[str, object]) -> FlowSpec:
    return parse_flow(document).spec


@pytest.mark.parametrize(("document", "problem"), [
    ({"nodes": {"a": "t"}}, "flow: is required"),
    ({"flow": "f"}, "nodes: is required"),
    ({"flow": "f", "nodes": {}}, "at least one node"),
    ({"flow": "f", "nodes": {"a": {"after": []}}}, "nodes.a.task: is required"),
    ({"flow": "f", "nodes": {"a": {"task": "t", "after": "b"}}}, "not a node of this flow"),
    ({"flow": "f", "nodes": {"a": {"task": "t", "after": "a"}}}, "cannot follow itself"),
    ({"flow": "f", "nodes": {"a": {"task": "t", "after": "b"}, "b": {"task": "t", "after": "a"}}},
     "cycle: a -> b -> a"),
    ({"flow": "f", "nodes": {"a": "t", "b": {"task": "t", "after": {"a": "maybe"}}}},
     "nodes.b.after.a: must be one of success, failure, always"),
    ({"flow": "f", "nodes": {"a": "t", "b": {"task": "t", "after": "a", "join": "most"}}},
     "must be one of all, any"),
    ({"flow": "f", "nodes": {"a": {"task": "t", "join": "any"}}}, "only a node that comes after"),
    ({"flow": "f", "nodes": {"a": {"task": "t", "retries": 3}}}, "nodes.a.retries: is not a node"),
    ({"flow": "f", "timeout": 30, "nodes": {"a": "t"}}, "timeout: must be a duration"),
    ({"flow": "f", "timeout": "100ms", "nodes": {"a": "t"}}, "between 1s and 30d"),
    ({"flow": "f", "failure": "panic", "nodes": {"a": "t"}}, "must be one of stop, continue"),
    ({"flow": "f", "owner": "x", "nodes": {"a": "t"}}, "owner: is not a flow field"),
    ({"flow": "F!", "nodes": {"a": "t"}}, "flow"),
])
def test_a_bad_document_is_refused_with_where_and_why(document: dict[str, object],
                                                       problem: str) -> None:
    with pytest.raises(InvalidInput, match=problem.replace("(", r"\(")):
        parse_flow(document)


def test_the_content_is_canonical_and_round_trips() -> None:
    one = spec({"flow": "f", "timeout": "1h", "nodes": {
        "b": {"task": "t", "after": {"a": "always", "c": "failure"}, "join": "any"},
        "a": "t", "c": {"task": "t", "after": ["a"], "parameters": {"n": 1}}}})
    two = spec({"flow": "f", "timeout": "60m", "nodes": {
        "a": "t", "c": {"task": "t", "after": "a", "parameters": {"n": 1}},
        "b": {"task": "t", "after": {"c": "failure", "a": "always"}, "join": "any"}}})
    assert one.content() == two.content()
    assert spec_from_content(one.content()).content() == one.content()
    assert one.digest(flow_id="f", name="f", pins=PINS) == two.digest(flow_id="f", name="f",
                                                                     pins=PINS)
    other_pin = {"t": TaskPin(revision=2, digest="a" * 64, name="t")}
    assert one.digest(flow_id="f", name="f", pins=other_pin) != one.digest(
        flow_id="f", name="f", pins=PINS)


# -- generated graphs ------------------------------------------------------------------


@st.composite
def graphs(draw: st.DrawFn) -> FlowSpec:
    size = draw(st.integers(1, 8))
    nodes = []
    for index in range(size):  # edges only to earlier nodes: acyclic by construction
        ups = draw(st.lists(st.integers(0, index - 1), unique=True, max_size=3)) if index else []
        after = tuple(Edge(f"n{u}", draw(st.sampled_from(list(Condition)))) for u in ups)
        nodes.append(FlowNode(node_id=f"n{index}", task_id="t", after=after,
                              join=draw(st.sampled_from(list(Join))) if after else Join.ALL))
    return FlowSpec(nodes=tuple(nodes), failure=draw(st.sampled_from(list(FailurePolicy))))


def _satisfied(edge: Edge, state: NodeState) -> bool:
    return ((state is NodeState.SUCCEEDED and edge.condition is not Condition.FAILURE)
            or (state is NodeState.FAILED and edge.condition is not Condition.SUCCESS))


@settings(max_examples=300, deadline=None)
@given(graphs(), st.randoms(use_true_random=False))
def test_every_flow_run_ends_each_node_released_at_most_once_and_only_when_due(
        flow: FlowSpec, rnd: random.Random) -> None:
    states = {n.node_id: NodeState.PENDING for n in flow.nodes}
    released: list[str] = []
    for _ in range(4 * len(flow.nodes) + 2):
        progress = advance(flow, states)
        for node_id in progress.release:
            assert states[node_id] is NodeState.PENDING
            node = flow.node(node_id)
            edges = [_satisfied(e, states[e.upstream]) for e in node.after]
            assert node.root or (all(edges) if node.join is Join.ALL else any(edges))
            states[node_id] = NodeState.RELEASED
            released.append(node_id)
        for node_id in progress.skip:
            assert states[node_id] is NodeState.PENDING and not flow.node(node_id).root
            states[node_id] = NodeState.SKIPPED
        if progress.ended is not None:
            break
        running = [k for k, v in states.items() if v is NodeState.RELEASED]
        assert running, "nothing runs and the flow run did not end"
        done = rnd.choice(running)  # one Run ends, one way or the other
        states[done] = rnd.choice([NodeState.SUCCEEDED, NodeState.FAILED])
    assert progress.ended is not None
    assert all(state in ENDED_NODE for state in states.values())
    assert len(released) == len(set(released))
    failed = NodeState.FAILED in states.values()
    assert progress.ended is (FlowStatus.FAILED if failed else FlowStatus.SUCCEEDED)
