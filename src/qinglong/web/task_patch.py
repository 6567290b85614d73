"""A task publish body of the API (web/requests.py) as the domain's TaskPatch: what a
revision changes, every part left out kept."""

from __future__ import annotations

from qinglong.domain.parameters import Parameter, ParamType, check_parameters
from qinglong.domain.placement import parse_requirements
from qinglong.domain.publishing import TaskPatch
from qinglong.domain.scripts import ScriptRef
from qinglong.domain.task import ArgvCommand, EnvEntry, ShellCommand
from qinglong.web import requests as rq


def _command(body: rq.TaskPublishRequest) -> ArgvCommand | ShellCommand | ScriptRef | None:
    given = body.command
    if isinstance(given, rq.ScriptCommandRequest):
        return ScriptRef(path=given.path, interpreter=given.interpreter, args=tuple(given.args))
    if isinstance(given, rq.ShellCommandRequest):
        return ShellCommand(command=given.command, shell=given.shell or "/bin/sh")
    if isinstance(given, rq.ArgvCommandRequest):
        return ArgvCommand(file=given.argv[0], args=tuple(given.argv[1:]))
    return None


def _retry(body: rq.TaskPublishRequest) -> dict[str, object]:
    if body.retry is None:
        return {}
    given = {name: getattr(body.retry, name) for name in body.retry.model_fields_set}
    codes = given.get("on_exit_codes")
    if codes is not None:
        given["on_exit_codes"] = () if codes == "any" else tuple(codes)
    return {name: value for name, value in given.items() if value is not None}


def task_patch(body: rq.TaskPublishRequest) -> TaskPatch:
    given = body.model_fields_set
    return TaskPatch(
        command=_command(body),
        env_set=tuple(EnvEntry(name=name, value=value)
                      for name, value in (body.environment or {}).items()),
        env_unset=tuple(body.unset_environment),
        env_clear=body.clear_environment,
        working_directory=body.working_directory,
        clear_working_directory="working_directory" in given and body.working_directory is None,
        timeout_ms=body.timeout_ms,
        retry=_retry(body),
        idempotent=body.idempotent,
        concurrency=body.concurrency,
        clear_concurrency="concurrency" in given and body.concurrency is None,
        requires=None if body.requires is None else parse_requirements(body.requires),
        parameters=None if body.parameters is None else check_parameters(
            Parameter(name=p.name, type=ParamType.parse(p.type), default=p.default)
            for p in body.parameters),
        memory_limit_bytes=body.memory_limit_bytes,
        clear_memory_limit="memory_limit_bytes" in given and body.memory_limit_bytes is None,
        cpu_limit_s=body.cpu_limit_s,
        clear_cpu_limit="cpu_limit_s" in given and body.cpu_limit_s is None,
    )
