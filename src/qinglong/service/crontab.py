"""``ql import crontab``: a user crontab as one project's tasks and triggers.

Each job line (five cron fields and a command, or an ``@hourly``/``@daily``/... macro and a
command) becomes a shell task and a trigger with the same id, in the zone given on the
command line (or a ``CRON_TZ=`` line above it). Comments and blank lines are skipped.
``NAME=value`` lines set the environment of the jobs below them, as cron does (plain values:
``ql export`` writes them as they are); ``SHELL=`` picks the interpreter (/bin/sh or
/bin/bash) instead, and ``CRON_TZ=`` the zone. Lines that configure cron itself (``MAILTO``
and cron's other mail settings, ``RANDOM_DELAY``) are not imported. A crontab has no timeout,
so no job gets one (the longest a task may have) unless a timeout is given.

What became of every variable line, and the timeout, is said in ``notes`` (``ql import
crontab`` prints them), so nothing is decided silently.

Ids are stable: ``cron-`` and the first 10 hex digits of the SHA-256 of
``<schedule>\\n<command>`` (the schedule as five normalised fields, macros expanded), so
importing the same crontab again changes nothing, reordering lines changes nothing, and an
edited environment line changes the tasks in place. A line whose schedule or command
changes gets a new id (``--prune`` disables the old one). A second identical line gets
``-2``, a third ``-3``, and so on.

The command is the rest of the line, as cron runs it with ``SHELL -c``; ``\\%`` becomes
``%``, and an unescaped ``%`` (cron's "the rest is standard input") is refused. A system
crontab's user column is not understood (it would be read as the command's first word).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass

from qinglong.domain.cron import CronSchedule, normalize_expression
from qinglong.domain.durations import format_duration
from qinglong.domain.identifiers import project_id
from qinglong.domain.task import MAX_TIMEOUT_MS, MIN_TIMEOUT_MS, EnvEntry, ShellCommand
from qinglong.domain.timezones import canonical_timezone
from qinglong.domain.trigger import MisfirePolicy, Overlap, TriggerSpec
from qinglong.errors import InvalidInput
from qinglong.service.definition_model import (
    Definitions,
    DesiredProject,
    DesiredTask,
    DesiredTrigger,
    EnvValue,
    Issues,
    Where,
    merge_projects,
)

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
SHELLS = ("/bin/sh", "/bin/bash")
_ENV_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")
_JOB_LINE = re.compile(r"^(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(.*\S)\s*$")
_MACRO_LINE = re.compile(r"^(@[A-Za-z]+)(?:\s+(.*\S))?\s*$")
MAX_NAME = 100
_OUTPUT = "qinglong keeps each Run's output (ql run logs) and notifies with ql notify"
CRON_SETTINGS = {  # variables that configure cron, not the job: never environment entries
    "MAILTO": f"it tells cron where to mail a job's output; {_OUTPUT}",
    "MAILFROM": f"it tells cron how to mail a job's output; {_OUTPUT}",
    "CONTENT_TYPE": f"it tells cron how to mail a job's output; {_OUTPUT}",
    "CONTENT_TRANSFER_ENCODING": f"it tells cron how to mail a job's output; {_OUTPUT}",
    "RANDOM_DELAY": ("it delays cron's start by random minutes; a trigger's jitter spreads its "
                     "Runs in qinglong (docs/controls/triggers.md)"),
}


@dataclass(frozen=True, slots=True)
class CrontabImport:
    definitions: Definitions
    notes: list[str]  # what became of each variable line, and the timeout


def _jobs(count: int) -> str:
    return "no job" if count == 0 else f"the {count} job{'s' if count > 1 else ''}"


class _Variables:
    """The variable lines met so far, and how many jobs each one reaches (for the notes)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.env: dict[str, EnvValue] = {}
        self.shell_line: int | None = None
        self.zone_line: int | None = None
        self.lines: list[tuple[int, str, str, str]] = []  # (line, kind, name, value)
        self.reach: Counter[int] = Counter()

    def job(self) -> None:
        for entry in self.env.values():
            assert entry.where is not None and entry.where.line is not None
            self.reach[entry.where.line] += 1
        for line in (self.shell_line, self.zone_line):
            if line is not None:
                self.reach[line] += 1

    def notes(self) -> list[str]:
        notes = []
        for line, kind, name, value in self.lines:
            count = self.reach[line]
            jobs = _jobs(count)
            if kind == "cron":
                text = f"{name}: not imported: {CRON_SETTINGS[name]}"
            elif kind == "env":
                text = f"{name}: an environment entry of {jobs} below it"
            elif kind == "shell":
                text = f"SHELL={value}: {jobs} below it run{'s' if count == 1 else ''} with {value}"
            elif count == 0:
                text = f"CRON_TZ={value}: no job below it uses it"
            else:
                text = (f"CRON_TZ={value}: the schedule{'s' if count > 1 else ''} of {jobs} below "
                        f"it {'are' if count > 1 else 'is'} in {value}")
            notes.append(f"{self.source}:{line}: {text}")
        return notes


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _command(text: str) -> str:
    """Cron's ``%`` rule: ``\\%`` is a literal ``%``; a bare ``%`` is refused."""
    out, index = [], 0
    while index < len(text):
        char = text[index]
        if char == "\\" and text[index + 1:index + 2] == "%":
            out.append("%")
            index += 2
            continue
        if char == "%":
            raise InvalidInput("command", "an unescaped % is cron's 'the rest is standard "
                                          "input'; write \\% for a literal %, or pipe the input "
                                          "in (printf ... | command)")
        out.append(char)
        index += 1
    return "".join(out)


def _name(command: str) -> str:
    text = " ".join(command.split())
    return text if len(text) <= MAX_NAME else text[: MAX_NAME - 3] + "..."


def line_id(expression: str, command: str) -> str:
    digest = hashlib.sha256(f"{expression}\n{command}".encode()).hexdigest()
    return f"cron-{digest[:10]}"


def crontab_definitions(text: str, source: str, project: str, timezone: str,
                        name: str | None = None, timeout_ms: int | None = None
                        ) -> CrontabImport:
    """The crontab ``text`` as project ``project``, with notes on what became of its
    variable lines and the timeout (``timeout_ms`` None: none, i.e. the longest a task may
    have); DefinitionErrors names each bad line."""
    project_id(project)
    zone = canonical_timezone(timezone)
    if timeout_ms is not None and not MIN_TIMEOUT_MS <= timeout_ms <= MAX_TIMEOUT_MS:
        raise InvalidInput("timeout", "must be between 1 ms and 365 days")
    issues = Issues()
    variables = _Variables(source)
    env = variables.env
    shell = "/bin/sh"
    desired = DesiredProject(project_id=project, name=name, where=Where(source))
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        where = Where(source, number)
        if not line or line.startswith("#"):
            continue
        assignment = _ENV_LINE.match(line)
        if assignment:
            key, value = assignment.group(1), _unquote(assignment.group(2))
            if key == "SHELL":
                if value not in SHELLS:
                    issues.add(where, "SHELL", "only /bin/sh and /bin/bash are supported")
                shell, variables.shell_line = value, number
                variables.lines.append((number, "shell", key, value))
            elif key == "CRON_TZ":
                try:
                    zone = canonical_timezone(value)
                except InvalidInput as exc:
                    issues.add(where, "CRON_TZ", exc.rule)
                variables.zone_line = number
                variables.lines.append((number, "zone", key, zone))
            elif key in CRON_SETTINGS:
                variables.lines.append((number, "cron", key, value))
            else:
                try:
                    EnvEntry(name=key, value=value)
                except InvalidInput as exc:
                    issues.add(where, key, exc.rule)
                    continue
                env[key] = EnvValue(name=key, value=value, where=where)
                variables.lines.append((number, "env", key, value))
            continue
        macro = _MACRO_LINE.match(line)
        if macro:
            word, command_text = macro.group(1).lower(), macro.group(2)
            if word == "@reboot":
                issues.add(where, "schedule", "@reboot runs at boot; qinglong has no boot "
                                              "trigger (run it from your init system)")
                continue
            if word not in MACROS:
                issues.add(where, "schedule", f"unknown macro {macro.group(1)!r} (known: "
                           + ", ".join(MACROS) + ")")
                continue
            expression = MACROS[word]
            if command_text is None:
                issues.add(where, "command", "is missing after the schedule")
                continue
        else:
            job = _JOB_LINE.match(line)
            if job is None:
                issues.add(where, "", "not a crontab line: expected five cron fields and a "
                                      "command, an @macro and a command, or NAME=value")
                continue
            expression, command_text = " ".join(job.groups()[:5]), job.group(6)
        try:
            expression = normalize_expression(expression)
        except InvalidInput as exc:
            issues.add(where, "schedule", exc.rule)
            continue
        try:
            command = ShellCommand(command=_command(command_text),
                                   shell=shell if shell in SHELLS else "/bin/sh")
        except InvalidInput as exc:
            issues.add(where, "command", exc.rule)
            continue
        ident = line_id(expression, command.command)
        seen[ident] = seen.get(ident, 0) + 1
        if seen[ident] > 1:
            ident = f"{ident}-{seen[ident]}"
        lines = {"schedule": where, "command": where, "cwd": where, "timeout": where}
        variables.job()
        desired.tasks[ident] = DesiredTask(
            project_id=project, task_id=ident, name=_name(command.command), command=command,
            env=tuple(env.values()),
            timeout_ms=MAX_TIMEOUT_MS if timeout_ms is None else timeout_ms, where=where,
            lines=lines)
        desired.triggers[ident] = DesiredTrigger(
            project_id=project, trigger_id=ident, task_id=ident,
            spec=TriggerSpec(schedule=CronSchedule(expression, zone),
                                 misfire_policy=MisfirePolicy.SKIP, overlap=Overlap()),
            where=where, lines=lines)
    if not desired.tasks and not issues.items:
        issues.add(Where(source), "", "holds no job line")
    issues.raise_any()
    definitions = merge_projects([desired], issues)
    issues.raise_any()
    if timeout_ms is None:
        timeout = (f"cron has no timeout, so no job gets one (timeout "
                   f"{format_duration(MAX_TIMEOUT_MS)}, the longest a task may have); "
                   "--timeout DURATION gives every job one")
    else:
        timeout = f"every job gets timeout {format_duration(timeout_ms)} (--timeout)"
    return CrontabImport(definitions, [*variables.notes(), f"{source}: {timeout}"])
