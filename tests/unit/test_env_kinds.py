"""A task's environment entries are plain or secret (issue 18, item 2).

A secret's canonical JSON is what every entry's was before entries had a kind (so stored
revisions keep their digests and read back as secrets); a plain entry adds ``"plain": true``.
The executor never sees the kind: an execution plan leaves it out.
"""

from __future__ import annotations

import pytest

from qinglong.domain.canonical import canonical_json
from qinglong.domain.task import (
    CommandSpec,
    EnvEntry,
    ExecutorType,
    ShellCommand,
    compile_execution_revision,
    environment_from_pairs,
    execution_revision_from_row,
    new_task_revision,
    parse_command_config,
    plan_json_text,
    spec_json_text,
)
from qinglong.errors import InvalidInput

COMMAND = ShellCommand(command="echo $HOME")


def spec(*entries: EnvEntry) -> CommandSpec:
    return CommandSpec(command=COMMAND, environment=entries)


def test_a_secret_is_written_as_every_entry_was_and_a_plain_entry_says_so() -> None:
    both = spec(EnvEntry(name="TOKEN", value="t"), EnvEntry(name="HOME", value="/srv", plain=True))
    assert spec_json_text(both) == canonical_json({"schema": "qinglong/command@v1", "config": {
        "command": {"kind": "shell", "command": "echo $HOME", "shell": "/bin/sh"},
        "environment": [{"name": "HOME", "plain": True, "value": "/srv"},
                        {"name": "TOKEN", "value": "t"}],
        "timeoutMs": 3_600_000}})
    assert parse_command_config(both.config_json()) == both
    assert [e.plain for e in parse_command_config(both.config_json()).environment] == [True, False]


def test_the_kind_is_part_of_the_digest() -> None:
    def digest(entry: EnvEntry) -> str:
        return new_task_revision(project="p", task="t", revision=1, name="t", spec=spec(entry),
                                 enabled=True, created_at_ms=0).content_digest

    assert digest(EnvEntry(name="HOME", value="/srv")) != digest(
        EnvEntry(name="HOME", value="/srv", plain=True))


@pytest.mark.parametrize("mark", [False, "true", 1, None])
def test_a_plain_mark_is_written_only_as_true(mark: object) -> None:
    config = spec().config_json()
    config["environment"] = [{"name": "HOME", "value": "/srv", "plain": mark}]
    with pytest.raises(InvalidInput, match="plain mark is written only as true"):
        parse_command_config(config)


def test_an_execution_plan_leaves_the_kind_out() -> None:
    revision = new_task_revision(project="p", task="t", revision=1, name="t",
                                 spec=spec(EnvEntry(name="HOME", value="/srv", plain=True)),
                                 enabled=True, created_at_ms=0)
    execution = compile_execution_revision(revision, ExecutorType.LOCAL_PROCESS, 0)
    assert '"plain"' not in plan_json_text(execution)
    row = {"project_id": "p", "task_id": "t", "source_revision": 1,
           "source_content_digest": revision.content_digest,
           "task_revision": execution.task_revision, "executor_type": "local_process",
           "plan_schema": execution.plan_schema, "content_digest": execution.content_digest,
           "created_at_ms": 0}
    read = execution_revision_from_row(row, execution.plan_json())
    assert [(e.name, e.value) for e in read.plan.environment] == [("HOME", "/srv")]


def test_command_line_entries_are_plain() -> None:
    assert environment_from_pairs(["HOME=/srv", "X=a=b"]) == (
        EnvEntry(name="HOME", value="/srv", plain=True), EnvEntry(name="X", value="a=b", plain=True))
