"""The `qinglong/command@v1` task spec: what a task runs (a program with arguments, or a
shell command), its environment, working directory, timeout, retry policy, idempotence,
concurrency, the worker labels it requires and its resource limits, every bound checked, and its canonical JSON both ways."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from qinglong.domain.identifiers import ENTITY_ID, ENTITY_ID_RULE
from qinglong.domain.limits import ResourceLimits
from qinglong.domain.parameters import Parameter, check_parameters, parse_stored
from qinglong.domain.placement import check_canonical_requirements, parse_requirements
from qinglong.domain.retry import RetryPolicy
from qinglong.domain.scripts import Interpreter, check_digest, check_path, known_interpreters
from qinglong.domain.task_env import EnvEntry, env_json, parse_env_entry, plain_text
from qinglong.errors import InvalidInput

TASK_SPEC_SCHEMA = "qinglong/command@v1"

ALLOWED_SHELLS = ("/bin/sh", "/bin/bash")
MAX_ARGS = 256
MAX_COMMAND_BYTES = 64 * 1024
MAX_PATH_BYTES = 4096
MAX_ENV_ENTRIES = 256
MAX_ENV_BYTES = 64 * 1024
MIN_TIMEOUT_MS = 1
MAX_TIMEOUT_MS = 365 * 24 * 3600 * 1000
DEFAULT_TIMEOUT_MS = 3600 * 1000
MAX_CONCURRENCY = 10_000


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _absolute_path(value: object, field: str) -> str:
    text = plain_text(value, field, allow_empty=False)
    if not text.startswith("/"):
        raise InvalidInput(field, "must be an absolute path")
    if _utf8_len(text) > MAX_PATH_BYTES:
        raise InvalidInput(field, f"must be at most {MAX_PATH_BYTES} bytes")
    return text


def _exact_keys(obj: Mapping[str, object], field: str, required: set[str], optional: set[str]) -> None:
    keys = set(obj)
    missing = required - keys
    if missing:
        raise InvalidInput(field, f"missing key {min(missing)!r}")
    extra = keys - required - optional
    if extra:
        raise InvalidInput(field, f"unknown key {min(extra)!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ArgvCommand:
    """Run ``file`` directly with ``args`` (no shell)."""

    file: str
    args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _absolute_path(self.file, "command.file")
        if not isinstance(self.args, list | tuple):
            raise InvalidInput("command.args", "must be a list of strings")
        object.__setattr__(self, "args", tuple(self.args))
        if len(self.args) > MAX_ARGS:
            raise InvalidInput("command.args", f"at most {MAX_ARGS} arguments")
        total = _utf8_len(self.file)
        for index, arg in enumerate(self.args):
            total += _utf8_len(plain_text(arg, f"command.args[{index}]"))
        if total > MAX_COMMAND_BYTES:
            raise InvalidInput("command", f"must be at most {MAX_COMMAND_BYTES} bytes in total")

    def argv(self) -> list[str]:
        return [self.file, *self.args]

    def to_json(self) -> dict[str, object]:
        return {"kind": "argv", "file": self.file, "args": list(self.args)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ShellCommand:
    """Run ``command`` through ``/bin/sh -c`` or ``/bin/bash -c``."""

    command: str
    shell: str = "/bin/sh"

    def __post_init__(self) -> None:
        text = plain_text(self.command, "command.command", allow_empty=False)
        if not text.strip():
            raise InvalidInput("command.command", "must not be blank")
        if _utf8_len(text) > MAX_COMMAND_BYTES:
            raise InvalidInput("command.command", f"must be at most {MAX_COMMAND_BYTES} bytes")
        if self.shell not in ALLOWED_SHELLS:
            raise InvalidInput("command.shell", "must be /bin/sh or /bin/bash")

    def argv(self) -> list[str]:
        return [self.shell, "-c", self.command]

    def to_json(self) -> dict[str, object]:
        return {"kind": "shell", "command": self.command, "shell": self.shell}


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptCommand:
    """Run the project's script ``path`` -- exactly the content whose SHA-256 is ``digest``,
    pinned when the task was published -- with ``interpreter`` and ``args`` (docs/scripts.md).
    The executor fetches the content by its digest, verifies it and writes it into the Run's
    own directory; ``argv`` names the script by its path in the project until then."""

    path: str
    digest: str
    interpreter: str
    args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_path(self.path, "command.path")
        check_digest(self.digest, "command.digest")
        if self.interpreter not in tuple(Interpreter):
            raise InvalidInput("command.interpreter", f"must be one of {known_interpreters()}")
        if not isinstance(self.args, list | tuple):
            raise InvalidInput("command.args", "must be a list of strings")
        object.__setattr__(self, "args", tuple(self.args))
        if len(self.args) > MAX_ARGS:
            raise InvalidInput("command.args", f"at most {MAX_ARGS} arguments")
        total = _utf8_len(self.path)
        for index, arg in enumerate(self.args):
            total += _utf8_len(plain_text(arg, f"command.args[{index}]"))
        if total > MAX_COMMAND_BYTES:
            raise InvalidInput("command", f"must be at most {MAX_COMMAND_BYTES} bytes in total")

    def argv(self) -> list[str]:
        return [self.interpreter, self.path, *self.args]

    def to_json(self) -> dict[str, object]:
        return {"kind": "script", "path": self.path, "digest": self.digest,
                "interpreter": self.interpreter, "args": list(self.args)}


@dataclass(frozen=True, slots=True, kw_only=True)
class RepoPullCommand:
    """Pull the project's Git subscription ``repo`` and import its scripts (the task a
    subscription makes; docs/subscriptions.md). The executor runs ``ql repo import-run``
    with the database URL it was given for pulls, and nothing else gets that URL."""

    repo: str

    def __post_init__(self) -> None:
        if not isinstance(self.repo, str) or not ENTITY_ID.fullmatch(self.repo):
            raise InvalidInput("command.repo", ENTITY_ID_RULE)

    def argv(self) -> list[str]:
        return ["ql", "repo", "import-run", "--repo", self.repo]

    def to_json(self) -> dict[str, object]:
        return {"kind": "repo", "repo": self.repo}


@dataclass(frozen=True, slots=True, kw_only=True)
class DepsInstallCommand:
    """Install the project's current dependency set into this worker's cache (the task
    ``ql deps`` makes; docs/dependencies.md). The executor runs its installer on the set
    it reads when the Attempt starts; the log says which revision and digest."""

    def argv(self) -> list[str]:
        return ["python3", "-m", "qinglong.execution.deps_install"]  # with qinglong's python

    def to_json(self) -> dict[str, object]:
        return {"kind": "deps"}


Command = ArgvCommand | ShellCommand | ScriptCommand | RepoPullCommand | DepsInstallCommand


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandSpec:
    """The `qinglong/command@v1` task spec."""

    command: Command
    environment: tuple[EnvEntry, ...] = ()
    working_directory: str | None = None
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    idempotent: bool = False  # safe to run twice: a lost Attempt may be retried
    concurrency: int | None = None  # at most this many Runs of the task at once
    requires: tuple[str, ...] = ()  # worker labels a Run needs (domain/placement.py)
    limits: ResourceLimits = field(default_factory=ResourceLimits)  # domain/limits.py
    parameters: tuple[Parameter, ...] = ()  # domain/parameters.py

    def __post_init__(self) -> None:
        if not isinstance(self.retry, RetryPolicy):
            raise InvalidInput("retry", "must be a retry policy")
        if not isinstance(self.idempotent, bool):
            raise InvalidInput("idempotent", "must be true or false")
        if self.concurrency is not None and (
                not isinstance(self.concurrency, int) or isinstance(self.concurrency, bool)
                or not 1 <= self.concurrency <= MAX_CONCURRENCY):
            raise InvalidInput("concurrency", f"must be between 1 and {MAX_CONCURRENCY}")
        if len(self.environment) > MAX_ENV_ENTRIES:
            raise InvalidInput("environment", f"at most {MAX_ENV_ENTRIES} entries")
        names = [entry.name for entry in self.environment]
        if len(set(names)) != len(names):
            duplicate = next(n for n in names if names.count(n) > 1)
            raise InvalidInput("environment", f"name {duplicate!r} is given more than once")
        size = sum(_utf8_len(e.name) + _utf8_len(e.value) for e in self.environment)
        if size > MAX_ENV_BYTES:
            raise InvalidInput("environment", f"must be at most {MAX_ENV_BYTES} bytes in total")
        if names != sorted(names):
            object.__setattr__(
                self, "environment", tuple(sorted(self.environment, key=lambda e: e.name))
            )
        if self.working_directory is not None:
            _absolute_path(self.working_directory, "working-directory")
        if (
            not isinstance(self.timeout_ms, int)
            or isinstance(self.timeout_ms, bool)
            or not MIN_TIMEOUT_MS <= self.timeout_ms <= MAX_TIMEOUT_MS
        ):
            raise InvalidInput("timeout", "must be between 1 ms and 365 days")
        if not isinstance(self.requires, tuple):
            raise InvalidInput("requires", "must be a list of labels")
        object.__setattr__(self, "requires", parse_requirements(self.requires))
        if not isinstance(self.limits, ResourceLimits):
            raise InvalidInput("limits", "must be resource limits")
        object.__setattr__(self, "parameters", check_parameters(self.parameters))
        clash = sorted({p.name for p in self.parameters} & set(names))
        if clash:
            raise InvalidInput("parameters", f"{clash[0]!r} is both a parameter and an "
                                             "environment entry (a parameter is one already)")

    def config_json(self, *, entry_kinds: bool = True) -> dict[str, object]:
        """The canonical JSON config; without ``entry_kinds`` (an execution plan: the executor
        needs names and values only) no entry says whether it is plain."""
        config: dict[str, object] = {
            "command": self.command.to_json(),
            "environment": [env_json(e, entry_kinds) for e in self.environment],
            "timeoutMs": self.timeout_ms,
        }
        if self.working_directory is not None:
            config["workingDirectory"] = self.working_directory
        # Optional parts are written only when set, so revisions published before they
        # existed keep their canonical form (and digest).
        if not self.retry.default:
            config["retry"] = self.retry.to_json()
        if self.idempotent:
            config["idempotent"] = True
        if self.concurrency is not None:
            config["concurrency"] = self.concurrency
        if self.requires:
            config["requires"] = list(self.requires)
        if not self.limits.empty:
            config["limits"] = self.limits.to_json()
        if self.parameters:
            config["parameters"] = [p.to_json() for p in self.parameters]
        return config

    def envelope(self) -> dict[str, object]:
        return {"schema": TASK_SPEC_SCHEMA, "config": self.config_json()}


def _parse_command(value: object) -> Command:
    if not isinstance(value, Mapping):
        raise InvalidInput("command", "must be an object")
    kind = value.get("kind")
    if kind == "argv":
        _exact_keys(value, "command", {"kind", "file", "args"}, set())
        args = value["args"]
        if not isinstance(args, list):
            raise InvalidInput("command.args", "must be a list of strings")
        return ArgvCommand(file=value["file"], args=tuple(args))
    if kind == "shell":
        _exact_keys(value, "command", {"kind", "command", "shell"}, set())
        return ShellCommand(command=value["command"], shell=value["shell"])
    if kind == "deps":
        _exact_keys(value, "command", {"kind"}, set())
        return DepsInstallCommand()
    if kind == "repo":
        _exact_keys(value, "command", {"kind", "repo"}, set())
        return RepoPullCommand(repo=value["repo"])
    if kind == "script":
        _exact_keys(value, "command", {"kind", "path", "digest", "interpreter", "args"}, set())
        args = value["args"]
        if not isinstance(args, list):
            raise InvalidInput("command.args", "must be a list of strings")
        return ScriptCommand(path=value["path"], digest=value["digest"],
                             interpreter=value["interpreter"], args=tuple(args))
    raise InvalidInput("command.kind", "must be 'argv', 'shell', 'script', 'repo' or 'deps'")


def parse_command_config(config: object) -> CommandSpec:
    """Build a CommandSpec from its JSON config (exact shape, every bound checked)."""
    if not isinstance(config, Mapping):
        raise InvalidInput("spec.config", "must be an object")
    _exact_keys(config, "spec.config", {"command", "environment", "timeoutMs"},
                {"workingDirectory", "retry", "idempotent", "concurrency", "requires", "limits", "parameters"})
    environment = config["environment"]
    if not isinstance(environment, list):
        raise InvalidInput("environment", "must be a list")
    entries = []
    for item in environment:
        if not isinstance(item, Mapping):
            raise InvalidInput("environment", "entries must be objects")
        _exact_keys(item, "environment", {"name", "value"}, {"plain"})
        entries.append(parse_env_entry(item))
    timeout = config["timeoutMs"]
    if not isinstance(timeout, int) or isinstance(timeout, bool):
        raise InvalidInput("timeout", "must be an integer number of milliseconds")
    retry = RetryPolicy.parse(config["retry"]) if "retry" in config else RetryPolicy()
    if "retry" in config and retry.default:
        raise InvalidInput("retry", "is not in canonical form (the default is left out)")
    idempotent = config.get("idempotent", False)
    if "idempotent" in config and idempotent is not True:
        raise InvalidInput("idempotent", "is written only as true")
    return CommandSpec(
        command=_parse_command(config["command"]),
        environment=tuple(entries),
        working_directory=config.get("workingDirectory"),
        timeout_ms=timeout,
        retry=retry,
        idempotent=idempotent,
        concurrency=config.get("concurrency"),
        requires=check_canonical_requirements(config["requires"]) if "requires" in config
        else (),
        limits=ResourceLimits.parse(config["limits"]) if "limits" in config
        else ResourceLimits(),
        parameters=parse_stored(config["parameters"]) if "parameters" in config else (),
    )


def parse_task_envelope(envelope: object) -> CommandSpec:
    if not isinstance(envelope, Mapping):
        raise InvalidInput("spec", "must be an object")
    _exact_keys(envelope, "spec", {"schema", "config"}, set())
    if envelope["schema"] != TASK_SPEC_SCHEMA:
        raise InvalidInput("spec.schema", f"only {TASK_SPEC_SCHEMA} is supported")
    return parse_command_config(envelope["config"])


