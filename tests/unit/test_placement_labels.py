"""Placement in the domain (domain/placement.py): the grammar of labels and requirements,
their canonical forms, which labels meet which requirements, and a task spec's requirements
in its canonical JSON (written only when there are some, so older digests stay)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qinglong.domain.placement import (
    label_tokens,
    labels_text,
    parse_labels,
    parse_requirements,
    requirements_change,
    unmet,
)
from qinglong.domain.publishing import TaskPatch, merged_task_spec
from qinglong.domain.task import CommandSpec, ShellCommand, parse_task_envelope
from qinglong.errors import InvalidInput


def test_labels_parse_from_comma_lists_and_print_back_sorted() -> None:
    labels = parse_labels(["region=eu,gpu", "zone=eu-1.a"])
    assert labels == {"region": "eu", "gpu": None, "zone": "eu-1.a"}
    assert labels_text(labels) == "gpu,region=eu,zone=eu-1.a"
    assert labels_text({}) == "-"
    assert label_tokens(labels) == ["gpu", "region", "region=eu", "zone", "zone=eu-1.a"]


@pytest.mark.parametrize(("items", "problem"), [
    (["region=eu,region=us"], "more than once"),
    (["gpu", "gpu"], "more than once"),
    (["region=eu,,gpu"], "empty label"),
    (["Region=eu"], "a label is KEY"),
    (["region="], "a label is KEY"),
    (["region=e u"], "a label is KEY"),
    (["-gpu"], "a label is KEY"),
    ([",".join(f"k{i}" for i in range(33))], "at most 32"),
])
def test_bad_labels_are_refused(items: list[str], problem: str) -> None:
    with pytest.raises(InvalidInput, match=problem):
        parse_labels(items)


def test_requirements_are_sorted_each_once_and_a_key_given_once() -> None:
    assert parse_requirements(["region=eu", "gpu"]) == ("gpu", "region=eu")
    for bad in (["gpu", "gpu=a100"], ["region=eu", "region=us"], ["gpu", "gpu"]):
        with pytest.raises(InvalidInput, match="more than once"):
            parse_requirements(bad)
    with pytest.raises(InvalidInput, match="at most 16"):
        parse_requirements([f"k{i}" for i in range(17)])


def test_a_requirement_is_met_by_the_key_with_its_value_or_a_bare_key_by_any_value() -> None:
    assert unmet(("gpu", "region=eu"), {"gpu": "a100", "region": "eu"}) == []
    assert unmet(("gpu", "region=eu"), {"gpu": None, "region": "us"}) == ["region=eu"]
    assert unmet(("region=eu",), {"region": None}) == ["region=eu"]
    assert unmet(("gpu",), {}) == ["gpu"]
    assert unmet((), {}) == []


keys = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)
values = st.none() | st.from_regex(r"[A-Za-z0-9]{1,4}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, values, max_size=6), st.dictionaries(keys, values, max_size=4))
def test_the_token_subset_is_the_same_as_meeting_each_requirement(
        labels: dict[str, str | None], wanted: dict[str, str | None]) -> None:
    requires = parse_requirements([k if v is None else f"{k}={v}" for k, v in wanted.items()])
    meets = all(key in labels and (value is None or labels[key] == value)
                for key, value in wanted.items())
    # what the lease statement checks (every token of the Run among the worker's)
    assert (set(requires) <= set(label_tokens(labels))) is meets
    assert (unmet(requires, labels) == []) is meets


def test_requirements_change_replaces_clears_or_keeps() -> None:
    assert requirements_change(["gpu"], False) == ("gpu",)
    assert requirements_change([], True) == ()
    assert requirements_change([], False) is None
    with pytest.raises(InvalidInput, match="not both"):
        requirements_change(["gpu"], True)


def test_a_spec_writes_requirements_only_when_it_has_some() -> None:
    plain = CommandSpec(command=ShellCommand(command="true"))
    assert "requires" not in plain.config_json()
    needs = CommandSpec(command=ShellCommand(command="true"), requires=("region=eu", "gpu"))
    envelope = needs.envelope()
    assert envelope["config"]["requires"] == ["gpu", "region=eu"]  # type: ignore[index]
    assert parse_task_envelope(json.loads(json.dumps(envelope))) == needs
    unsorted = json.loads(json.dumps(envelope))
    unsorted["config"]["requires"] = ["region=eu", "gpu"]
    with pytest.raises(InvalidInput, match="canonical"):
        parse_task_envelope(unsorted)
    empty = json.loads(json.dumps(envelope))
    empty["config"]["requires"] = []
    with pytest.raises(InvalidInput, match="non-empty"):
        parse_task_envelope(empty)


def test_a_publish_keeps_replaces_or_clears_the_requirements() -> None:
    current = CommandSpec(command=ShellCommand(command="true"), requires=("gpu",))
    assert merged_task_spec(current, TaskPatch(timeout_ms=5000)).requires == ("gpu",)
    assert merged_task_spec(current, TaskPatch(requires=("region=eu",))).requires == (
        "region=eu",)
    assert merged_task_spec(current, TaskPatch(requires=())).requires == ()
