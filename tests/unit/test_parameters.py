"""Task parameters in the domain (domain/parameters.py): declarations, values by type, the
values of a Run (defaults and what a run now gives), the placeholders of argv tasks, and the
spec's canonical form (written only when there are some, so older digests stay)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qinglong.domain.parameters import (
    Parameter,
    ParamType,
    check_parameters,
    parameters_change,
    parse_declaration,
    parse_values,
    resolve,
    substitute,
    text,
)
from qinglong.domain.task import CommandSpec, EnvEntry, ShellCommand, parse_task_envelope
from qinglong.errors import InvalidInput

DECLARED = check_parameters([
    Parameter(name="who", type=ParamType.STRING, default="world"),
    Parameter(name="count", type=ParamType.INTEGER, default=2),
    Parameter(name="loud", type=ParamType.BOOLEAN, default=False),
])


def test_declarations_from_the_command_line() -> None:
    assert parse_declaration("who=world") == DECLARED[2]
    assert parse_declaration("count:int=2") == DECLARED[0]
    assert parse_declaration("loud:bool=false") == DECLARED[1]
    assert parse_declaration("note=").default == ""  # an empty text is a default too
    for bad, problem in (("who", "NAME\\[:TYPE\\]=DEFAULT"), ("count:int=two", "not an integer"),
                         ("x:float=1", "string, integer or boolean"), ("QL_X=1", "QL_"),
                         ("1x=1", "letters"), ("loud:bool=yes", "true or false")):
        with pytest.raises(InvalidInput, match=problem):
            parse_declaration(bad)


def test_a_runs_values_are_the_defaults_and_what_is_given() -> None:
    assert resolve(DECLARED, {}) == {"count": 2, "loud": False, "who": "world"}
    assert resolve(DECLARED, {"count": "5", "loud": "TRUE", "who": "there"}) == {
        "count": 5, "loud": True, "who": "there"}
    assert resolve(DECLARED, {"count": 7, "loud": True}) == {"count": 7, "loud": True,
                                                             "who": "world"}
    with pytest.raises(InvalidInput, match="no parameter 'nope'"):
        resolve(DECLARED, {"nope": "1"})
    with pytest.raises(InvalidInput, match="not an integer"):
        resolve(DECLARED, {"count": "1.5"})
    with pytest.raises(InvalidInput, match="not text"):
        resolve(DECLARED, {"who": 3})
    with pytest.raises(InvalidInput, match="out of range"):
        resolve(DECLARED, {"count": 2**60})
    assert resolve((), {}) == {}


def test_values_from_the_command_line() -> None:
    assert parse_values(["who=a=b", "count=3"]) == {"who": "a=b", "count": "3"}
    with pytest.raises(InvalidInput, match="more than once"):
        parse_values(["who=a", "who=b"])
    with pytest.raises(InvalidInput, match="NAME=VALUE"):
        parse_values(["who"])


def test_placeholders_in_argv_arguments() -> None:
    values = {"who": "there", "count": 5, "loud": True}
    assert substitute(["hello {{who}}", "{{count}}x", "{{loud}}", "{{nope}}", "{who}", "$who"],
                      values) == ["hello there", "5x", "true", "{{nope}}", "{who}", "$who"]
    assert substitute(["{{who}}"], {"who": "a b; rm -rf /"}) == ["a b; rm -rf /"]  # one arg
    assert (text(True), text(0), text("x")) == ("true", "0", "x")


def test_the_spec_writes_parameters_only_when_declared_in_name_order() -> None:
    plain = CommandSpec(command=ShellCommand(command="true"))
    assert "parameters" not in plain.config_json()
    spec = CommandSpec(command=ShellCommand(command="true"), parameters=DECLARED)
    envelope = json.loads(json.dumps(spec.envelope()))
    assert [p["name"] for p in envelope["config"]["parameters"]] == ["count", "loud", "who"]
    assert parse_task_envelope(envelope) == spec
    envelope["config"]["parameters"].reverse()
    with pytest.raises(InvalidInput, match="canonical"):
        parse_task_envelope(envelope)
    with pytest.raises(InvalidInput, match="both a parameter and an environment entry"):
        CommandSpec(command=ShellCommand(command="true"), parameters=DECLARED,
                    environment=(EnvEntry(name="who", value="x"),))
    with pytest.raises(InvalidInput, match="more than once"):
        check_parameters([DECLARED[0], DECLARED[0]])


def test_a_publish_replaces_clears_or_keeps_them() -> None:
    assert parameters_change(["b=1", "a:int=2"], False) == (
        Parameter(name="a", type=ParamType.INTEGER, default=2),
        Parameter(name="b", type=ParamType.STRING, default="1"))
    assert parameters_change([], True) == ()
    assert parameters_change([], False) is None
    with pytest.raises(InvalidInput, match="not both"):
        parameters_change(["a=1"], True)


@given(st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1))
def test_an_integer_given_as_text_reads_back(value: int) -> None:
    declared = (Parameter(name="n", type=ParamType.INTEGER, default=0),)
    assert resolve(declared, {"n": str(value)}) == {"n": value}
