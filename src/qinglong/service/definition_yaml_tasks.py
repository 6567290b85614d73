"""The tasks of a definitions file: ``tasks.<id>`` mappings to :class:`DesiredTask`."""

from __future__ import annotations

from typing import Any

from qinglong.domain.identifiers import display_name
from qinglong.domain.limits import ResourceLimits, parse_size, whole_seconds
from qinglong.domain.parameters import Parameter, ParamType, check_parameters
from qinglong.domain.placement import parse_requirements
from qinglong.domain.retry import RetryPolicy
from qinglong.domain.scripts import ScriptRef, interpreter_for
from qinglong.domain.task import (
    DEFAULT_TIMEOUT_MS,
    ENV_NAME,
    ArgvCommand,
    Command,
    CommandSpec,
    EnvEntry,
    ScriptCommand,
    ShellCommand,
)
from qinglong.errors import InvalidInput
from qinglong.service.definition_env import STORED
from qinglong.service.definition_model import DesiredTask, EnvValue, Issues, Where
from qinglong.service.definition_plan import spec_key
from qinglong.service.definition_yaml_nodes import Fields, YList, YMap, type_name

TASK_KEYS = ("name", "shell", "bash", "argv", "script", "interpreter", "args", "env", "cwd", "timeout", "retry", "idempotent",
             "concurrency", "requires", "limits", "parameters", "enabled")
PARAMETER_KEYS = ("name", "type", "default")
LIMIT_KEYS = ("memory", "cpu")
RETRY_KEYS = ("max_attempts", "backoff", "max_backoff", "on_exit", "on_timeout")
_RETRY_FIELDS = {"max-attempts": "max_attempts", "retry-backoff": "backoff",
                 "retry-max-backoff": "max_backoff", "retry-on-exit": "on_exit",
                 "retry-on-timeout": "on_timeout"}


def _script(fields: Fields) -> ScriptRef | None:
    """``script: PATH`` with an optional ``interpreter`` and ``args``: pinned to the script's
    content when the plan is made."""
    path = fields.text("script")
    interpreter = fields.text("interpreter") if "interpreter" in fields.map else None
    args: list[str] = []
    words = fields.items("args") if "args" in fields.map else None
    if words is not None:
        for index in range(len(words)):
            word = words.text(index)
            if not isinstance(word, str):
                fields.fail(f"args[{index}]", f"must be a string, not {type_name(word)}",
                            where=Where(fields.file, words.item_lines[index]))
                return None
            args.append(word)
    if path is None:
        return None
    return fields.attempt("script", lambda: ScriptRef(path=path, interpreter=interpreter,
                                                      args=tuple(args)))


def _checkable(command: ArgvCommand | ShellCommand | ScriptRef) -> Command:
    """A command the spec's bounds can be checked on (a script: with a stand-in digest; the
    plan pins the real one)."""
    if not isinstance(command, ScriptRef):
        return command
    return ScriptCommand(path=command.path, digest="0" * 64,
                         interpreter=interpreter_for(command.path, command.interpreter).value,
                         args=command.args)


def _command(fields: Fields) -> ArgvCommand | ShellCommand | ScriptRef | None:
    shell, argv = fields.map.get("shell"), fields.map.get("argv")
    script = fields.map.get("script")
    if sum(value is not None for value in (shell, argv, script)) > 1:
        fields.fail("argv" if argv is not None else "script",
                    "give one of shell, argv or script")
        return None
    for key in ("interpreter", "args"):
        if script is None and key in fields.map:
            fields.fail(key, "applies only to script")
    if script is not None:
        return _script(fields)
    if shell is None and argv is None:
        fields.fail("shell", "a task needs shell: COMMAND, argv: [/PROGRAM, ARGS...] or "
                             "script: PATH", where=fields.where())
        return None
    if shell is not None:
        command = fields.text("shell")
        bash = fields.flag("bash", False)
        if command is None:
            return None
        return fields.attempt("shell", lambda: ShellCommand(
            command=command, shell="/bin/bash" if bash else "/bin/sh"))
    if "bash" in fields.map:
        fields.fail("bash", "applies only to shell")
    words = fields.items("argv")
    if words is None:
        return None
    if not words:
        fields.fail("argv", "needs an absolute program path, e.g. [/bin/echo, hi]")
        return None
    texts = [words.text(index) for index in range(len(words))]
    ok = True
    for index, word in enumerate(texts):
        if not isinstance(word, str):
            fields.fail(f"argv[{index}]", f"must be a string, not {type_name(word)}",
                        where=Where(fields.file, words.item_lines[index]))
            ok = False
    if not ok:
        return None
    try:
        return ArgvCommand(file=texts[0], args=tuple(texts[1:]))
    except InvalidInput as exc:
        index = 0
        if exc.field.startswith("command.args["):
            index = int(exc.field.split("[", 1)[1].rstrip("]")) + 1
        fields.fail(f"argv[{index}]" if exc.field != "command" else "argv", exc.rule,
                    where=Where(fields.file, words.item_lines[index]))
        return None


def _env(fields: Fields) -> tuple[EnvValue, ...]:
    env = fields.mapping("env")
    values = []
    for name in env or {}:
        assert env is not None
        raw = env.text(name)
        where = Where(fields.file, env.key_lines[name])
        key = f"env.{name}"
        try:
            EnvEntry(name=name, value="")
        except InvalidInput as exc:
            fields.fail(key, exc.rule, where=where)
            continue
        if isinstance(raw, str):
            values.append(EnvValue(name=name, value=raw, where=where))
        elif isinstance(raw, YMap) and set(raw) == {"from_env"}:
            variable = raw["from_env"]
            if not isinstance(variable, str) or not ENV_NAME.fullmatch(variable):
                fields.fail(f"{key}.from_env", "must name an environment variable "
                            "([A-Za-z_][A-Za-z0-9_]*)", where=Where(fields.file, raw.line))
                continue
            values.append(EnvValue(name=name, from_env=variable, where=where))
        elif isinstance(raw, YMap) and set(raw) == {"secret"}:
            if raw["secret"] != STORED:
                fields.fail(f"{key}.secret", f"must be {STORED} ({{secret: {STORED}}} keeps the "
                            "secret stored under this name)", where=Where(fields.file, raw.line))
                continue
            values.append(EnvValue(name=name, where=where))
        else:
            fields.fail(key, "must be a string, {from_env: VARIABLE} or {secret: stored}, not "
                        f"{type_name(raw)}", where=where)
    return tuple(values)


def _retry(fields: Fields) -> RetryPolicy:
    retry = fields.mapping("retry")
    if retry is None:
        return RetryPolicy()
    sub = Fields(retry, fields.file, fields.name("retry"), fields.issues, RETRY_KEYS)
    given: dict[str, Any] = {}
    attempts = sub.number("max_attempts")
    if attempts is not None:
        given["max_attempts"] = attempts
    for key, name in (("backoff", "backoff_ms"), ("max_backoff", "max_backoff_ms")):
        value = sub.duration(key)
        if value is not None:
            given[name] = value
    codes = retry.get("on_exit")
    if isinstance(codes, str) and codes.strip().lower() == "any":
        given["on_exit_codes"] = ()
    elif isinstance(codes, YList):
        if all(isinstance(c, int) and not isinstance(c, bool) for c in codes):
            given["on_exit_codes"] = tuple(codes)
        else:
            sub.fail("on_exit", "must be a list of exit codes such as [1, 75], or any")
    elif codes is not None:
        sub.fail("on_exit", "must be a list of exit codes such as [1, 75], or any")
    given["on_timeout"] = sub.flag("on_timeout", False)
    if not sub.ok:
        fields.ok = False
        return RetryPolicy()
    try:
        return RetryPolicy(**given)
    except InvalidInput as exc:
        sub.fail(_RETRY_FIELDS.get(exc.field, exc.field), exc.rule)
        fields.ok = False
        return RetryPolicy()


def _requires(fields: Fields) -> tuple[str, ...]:
    """``requires: [region=eu, gpu]``: the worker labels a Run needs (none when left out)."""
    items = fields.items("requires")
    if items is None:
        return ()
    for index, item in enumerate(items):
        if not isinstance(item, str):
            fields.fail(f"requires[{index}]", f"must be a label such as region=eu, not "
                                              f"{type_name(item)}")
            return ()
    found = fields.attempt("requires", lambda: parse_requirements(list(items)))
    return () if found is None else found


def _limits(fields: Fields) -> ResourceLimits:
    """``limits: {memory: 512M, cpu: 10m}`` (none when left out)."""
    given = fields.mapping("limits")
    if given is None:
        return ResourceLimits()
    sub = Fields(given, fields.file, fields.name("limits"), fields.issues, LIMIT_KEYS)
    memory_text = sub.text("memory")
    memory = None if memory_text is None else sub.attempt("memory",
                                                          lambda: parse_size(memory_text))
    cpu_ms = sub.duration("cpu")
    cpu = None if cpu_ms is None else sub.attempt("cpu", lambda: whole_seconds(cpu_ms))
    if not sub.ok:
        fields.ok = False
        return ResourceLimits()
    found = sub.attempt("memory" if memory is not None else "cpu",
                        lambda: ResourceLimits(memory_bytes=memory, cpu_seconds=cpu))
    if found is None:
        fields.ok = False
    return found or ResourceLimits()


def _parameter(sub: Fields, item: YMap) -> Parameter | None:
    name = sub.text("name", required=True)
    type_text = sub.text("type") or "string"
    kind = sub.attempt("type", lambda: ParamType.parse(type_text, "type"))
    if "default" not in item:
        sub.fail("default", "is required (every parameter has a default)")
    if name is None or kind is None or not sub.ok:
        return None
    default = item.text("default") if kind is ParamType.STRING else item["default"]
    return sub.attempt("default", lambda: Parameter(name=name, type=kind, default=default))


def _parameters(fields: Fields) -> tuple[Parameter, ...]:
    """``parameters: [{name: region, default: eu}, {name: count, type: integer, default: 3}]``
    (a string unless ``type`` says integer or boolean; every one has a default)."""
    items = fields.items("parameters")
    if items is None:
        return ()
    found: list[Parameter] = []
    for index, item in enumerate(items):
        key = f"parameters[{index}]"
        if not isinstance(item, YMap):
            fields.fail(key, f"must be a mapping with name, type and default, not "
                             f"{type_name(item)}")
            continue
        made = _parameter(Fields(item, fields.file, fields.name(key), fields.issues,
                                 PARAMETER_KEYS), item)
        if made is None:
            fields.ok = False
        else:
            found.append(made)
    checked = fields.attempt("parameters", lambda: check_parameters(found))
    return () if checked is None else checked


def parse_task(project: str, task_id: str, mapping: YMap, file: str, issues: Issues,
          where: Where | None) -> DesiredTask | None:
    fields = Fields(mapping, file, f"tasks.{task_id}", issues, TASK_KEYS)
    command = _command(fields)
    env = _env(fields)
    name = fields.text("name")
    if name is not None:
        fields.attempt("name", lambda: display_name(name))
    cwd = fields.text("cwd")
    timeout = fields.duration("timeout")
    retry = _retry(fields)
    idempotent = fields.flag("idempotent", False)
    concurrency = fields.number("concurrency")
    requires = _requires(fields)
    limits = _limits(fields)
    parameters = _parameters(fields)
    enabled = fields.flag("enabled", True)
    if command is None or not fields.ok:
        return None
    task = DesiredTask(
        project_id=project, task_id=task_id, name=task_id if name is None else name,
        command=command, env=env, working_directory=cwd,
        timeout_ms=DEFAULT_TIMEOUT_MS if timeout is None else timeout, retry=retry,
        idempotent=idempotent, concurrency=concurrency, requires=requires, limits=limits,
        parameters=parameters, enabled=enabled, where=where,
        path=f"tasks.{task_id}",
        lines={key: Where(file, line) for key, line in mapping.key_lines.items()})
    try:  # every bound of the spec, before any value is read from the environment
        CommandSpec(command=_checkable(command),
                    environment=tuple(EnvEntry(name=e.name, value=e.value or "") for e in env),
                    working_directory=cwd, timeout_ms=task.timeout_ms, retry=retry,
                    idempotent=idempotent, concurrency=concurrency, requires=requires,
                    limits=limits, parameters=parameters)
    except InvalidInput as exc:
        key = spec_key(exc.field)
        issues.add(task.at(key), task.field_name(key), exc.rule)
        return None
    return task
