"""Definitions written as ``qinglong/v1`` YAML (``ql export``, ``ql import crontab -o``):
one document per project, defaults left out, ids sorted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml  # type: ignore[import-untyped, unused-ignore]

from qinglong.domain.cron import CronSchedule, DstGap, DstOverlap
from qinglong.domain.durations import format_duration
from qinglong.domain.interval import IntervalSchedule, format_every
from qinglong.domain.limits import size_text
from qinglong.domain.occurrences import instant_text
from qinglong.domain.once import OnceSchedule
from qinglong.domain.parameters import ParamType
from qinglong.domain.retry import RetryPolicy
from qinglong.domain.scripts import ScriptRef, interpreter_for
from qinglong.domain.task import DEFAULT_TIMEOUT_MS, ScriptCommand, ShellCommand
from qinglong.domain.timezones import UTC_NAME
from qinglong.domain.trigger import DEFAULT_QUEUE_LIMIT, MisfirePolicy, OverlapPolicy
from qinglong.errors import InvalidInput
from qinglong.service.definition_env import STORED
from qinglong.service.definition_flows import flow_document
from qinglong.service.definition_model import (
    API_VERSION,
    DesiredProject,
    DesiredTask,
    DesiredTrigger,
    EnvValue,
)

_DEFAULT_RETRY = RetryPolicy()

# --- the model -> YAML ---------------------------------------------------------------------


class _Flow(list[Any]):
    """A list written on one line: ``[/bin/echo, hi]``."""


class _FlowMap(dict[str, Any]):
    """A mapping written on one line: ``{from_env: TOKEN}``, ``{secret: stored}``."""


class _Dumper(yaml.SafeDumper):  # type: ignore[misc, unused-ignore]
    pass


# Line breaks a reader folds or normalises in every style but a double-quoted one, where
# they are escapes (\r, \N, \L, \P).
_FOLDED_BREAKS = frozenset("\r\x85\u2028\u2029")


def _represent_str(dumper: Any, data: str) -> Any:
    if not _FOLDED_BREAKS.isdisjoint(data):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"')
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(_Flow, lambda d, v: d.represent_sequence(
    "tag:yaml.org,2002:seq", list(v), flow_style=True))
_Dumper.add_representer(_FlowMap, lambda d, v: d.represent_mapping(
    "tag:yaml.org,2002:map", dict(v), flow_style=True))


def _env_value(entry: EnvValue) -> object:
    if entry.value is not None:
        return entry.value
    if entry.from_env is not None:
        return _FlowMap(from_env=entry.from_env)
    return _FlowMap(secret=STORED)


def _by_extension(path: str) -> str | None:
    try:
        return interpreter_for(path).value
    except InvalidInput:
        return None


def task_document(task: DesiredTask) -> dict[str, Any]:
    """A task as the file writes it: defaults left out."""
    doc: dict[str, Any] = {}
    if task.name != task.task_id:
        doc["name"] = task.name
    if isinstance(task.command, ShellCommand):
        doc["shell"] = task.command.command
        if task.command.shell == "/bin/bash":
            doc["bash"] = True
    elif isinstance(task.command, ScriptCommand):
        doc["script"] = task.command.path  # pinned again to the script's content by apply
        if _by_extension(task.command.path) != task.command.interpreter:
            doc["interpreter"] = task.command.interpreter
        if task.command.args:
            doc["args"] = _Flow(list(task.command.args))
    elif isinstance(task.command, ScriptRef):
        doc["script"] = task.command.path
    else:
        doc["argv"] = _Flow(task.command.argv())
    if task.env:
        doc["env"] = {e.name: _env_value(e) for e in task.env}
    if task.working_directory is not None:
        doc["cwd"] = task.working_directory
    if task.timeout_ms != DEFAULT_TIMEOUT_MS:
        doc["timeout"] = format_duration(task.timeout_ms)
    retry = task.retry
    if not retry.default:
        given: dict[str, Any] = {}
        if retry.max_attempts != _DEFAULT_RETRY.max_attempts:
            given["max_attempts"] = retry.max_attempts
        if retry.backoff_ms != _DEFAULT_RETRY.backoff_ms:
            given["backoff"] = format_duration(retry.backoff_ms)
        if retry.max_backoff_ms != _DEFAULT_RETRY.max_backoff_ms:
            given["max_backoff"] = format_duration(retry.max_backoff_ms)
        if retry.on_exit_codes:
            given["on_exit"] = _Flow(retry.on_exit_codes)
        if retry.on_timeout:
            given["on_timeout"] = True
        doc["retry"] = given
    if task.idempotent:
        doc["idempotent"] = True
    if task.concurrency is not None:
        doc["concurrency"] = task.concurrency
    if task.requires:
        doc["requires"] = _Flow(task.requires)
    if task.parameters:
        doc["parameters"] = [_FlowMap(p.to_json() if p.type is not ParamType.STRING
                                      else {"name": p.name, "default": p.default})
                             for p in task.parameters]
    if not task.limits.empty:
        limits: dict[str, Any] = {}
        if task.limits.memory_bytes is not None:
            limits["memory"] = size_text(task.limits.memory_bytes)
        if task.limits.cpu_seconds is not None:
            limits["cpu"] = format_duration(task.limits.cpu_seconds * 1000)
        doc["limits"] = _FlowMap(limits)
    if not task.enabled:
        doc["enabled"] = False
    return doc


def trigger_document(trigger: DesiredTrigger) -> dict[str, Any]:
    spec = trigger.spec
    schedule = spec.schedule
    doc: dict[str, Any] = {"task": trigger.task_id}
    if isinstance(schedule, IntervalSchedule):
        doc["every"] = format_every(schedule.every_s)
        doc["anchor"] = instant_text(schedule.anchor_ms)
    elif isinstance(schedule, OnceSchedule):
        doc["at"] = instant_text(schedule.at_ms)
    else:
        doc["cron"] = schedule.expression
    if isinstance(schedule, CronSchedule) or spec.timezone != UTC_NAME:
        doc["timezone"] = spec.timezone
    if isinstance(schedule, CronSchedule) and schedule.dst.gap is not DstGap.SHIFT:
        doc["dst_gap"] = schedule.dst.gap.value
    if isinstance(schedule, CronSchedule) and schedule.dst.overlap is not DstOverlap.FIRST:
        doc["dst_overlap"] = schedule.dst.overlap.value
    if spec.jitter is not None:
        doc["jitter"] = format_duration(spec.jitter.max_s * 1000)
        if spec.jitter.random_s:
            doc["jitter_random"] = format_duration(spec.jitter.random_s * 1000)
    if spec.misfire_policy is not MisfirePolicy.SKIP:
        doc["misfire"] = spec.misfire_policy.value
    if spec.overlap.policy is not OverlapPolicy.ALLOW:
        doc["overlap"] = spec.overlap.policy.value
        if spec.overlap.queue_limit != DEFAULT_QUEUE_LIMIT:
            doc["overlap_queue_limit"] = spec.overlap.queue_limit
    if spec.flow is not None:
        doc["flow"] = spec.flow
    if spec.parameters:
        doc["parameters"] = spec.values
    if not trigger.enabled:
        doc["enabled"] = False
    return doc


def project_document(project: DesiredProject) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": API_VERSION, "project": project.project_id}
    if project.name is not None and project.name != project.project_id:
        doc["name"] = project.name
    doc["tasks"] = {t: task_document(project.tasks[t]) for t in sorted(project.tasks)}
    doc["triggers"] = {t: trigger_document(project.triggers[t]) for t in sorted(project.triggers)}
    if project.flows:
        doc["flows"] = {f: flow_document(project.flows[f]) for f in sorted(project.flows)}
    return doc


EXPORT_HEADER = """\
# qinglong definitions: apply with `ql apply -f FILE` (docs/controls/apply.md).
# Environment values are written as they are, except secrets: {secret: stored} keeps the value
# stored where the file is applied (elsewhere, give it as {from_env: VARIABLE}).
"""


def dump_projects(projects: Sequence[DesiredProject], header: str = EXPORT_HEADER) -> str:
    """The projects as a YAML stream, one document each."""
    body = yaml.dump_all([project_document(p) for p in projects], Dumper=_Dumper,
                         sort_keys=False, allow_unicode=True, default_flow_style=False,
                         explicit_start=True, width=1_000_000_000)
    return header + str(body)
