"""The ``qinglong/v1`` YAML format of ``ql apply`` and ``ql export`` (docs/controls/apply.md).

Each YAML document states one project::

    apiVersion: qinglong/v1
    project: demo
    tasks:
      backup:
        shell: /usr/local/bin/backup --all
        env: {BUCKET: nightly, TOKEN: {from_env: BACKUP_TOKEN}}
        timeout: 30m
    triggers:
      nightly:
        task: backup
        cron: "0 3 * * *"
        timezone: Asia/Shanghai
      heartbeat:
        task: backup
        every: 90s                 # or at: 2026-12-24T18:00:00+08:00 (once)

Files are read with PyYAML's safe loader; every mapping keeps the line of each key, so a
problem is reported as ``jobs.yaml:12: triggers.nightly.cron: ...``. Every problem of every
file is collected before anything is reported, and unknown keys and duplicate keys are
refused (a typo never silently becomes a default).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

import yaml  # type: ignore[import-untyped, unused-ignore]

from qinglong.domain.cron import (
    CronSchedule,
    DstGap,
    DstOverlap,
    DstPolicy,
    check_dst_applies,
    normalize_expression,
)
from qinglong.domain.identifiers import display_name, entity_id, project_id
from qinglong.domain.interval import IntervalSchedule, check_every, format_every
from qinglong.domain.jitter import Jitter
from qinglong.domain.occurrences import instant_text, parse_instant
from qinglong.domain.once import OnceSchedule
from qinglong.domain.retry import RetryPolicy
from qinglong.domain.task import (
    DEFAULT_TIMEOUT_MS,
    ENV_NAME,
    ArgvCommand,
    CommandSpec,
    EnvEntry,
    ShellCommand,
)
from qinglong.domain.timezones import UTC_NAME, canonical_timezone
from qinglong.domain.trigger import (
    DEFAULT_QUEUE_LIMIT,
    MisfirePolicy,
    Overlap,
    OverlapPolicy,
    ScheduleKind,
    TriggerSpec,
)
from qinglong.errors import InvalidInput
from qinglong.service.declarative import (
    API_VERSION,
    Definitions,
    DesiredProject,
    DesiredTask,
    DesiredTrigger,
    EnvValue,
    Issues,
    Where,
    format_duration,
    merge_projects,
    parse_duration,
    spec_key,
)

T = TypeVar("T")

SUFFIXES = (".yaml", ".yml")
DOCUMENT_KEYS = ("apiVersion", "project", "name", "tasks", "triggers")
TASK_KEYS = ("name", "shell", "bash", "argv", "env", "cwd", "timeout", "retry", "idempotent",
             "concurrency", "enabled")
RETRY_KEYS = ("max_attempts", "backoff", "max_backoff", "on_exit", "on_timeout")
TRIGGER_KEYS = ("task", "cron", "every", "anchor", "at", "timezone", "dst_gap", "dst_overlap",
                "jitter", "jitter_random", "misfire", "overlap", "overlap_queue_limit",
                "enabled")
_RETRY_FIELDS = {"max-attempts": "max_attempts", "retry-backoff": "backoff",
                 "retry-max-backoff": "max_backoff", "retry-on-exit": "on_exit",
                 "retry-on-timeout": "on_timeout"}
_DEFAULT_RETRY = RetryPolicy()


# --- located YAML values ----------------------------------------------------------------


class YMap(dict[str, Any]):
    """A YAML mapping that remembers its own line, the line of each key, and the text of
    each plain scalar value that YAML read as something else than a string (``off``,
    ``8080``, ``0755``), for the fields that take text as written."""

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.key_lines: dict[str, int] = {}
        self.raw: dict[str, str] = {}

    def text(self, key: str) -> Any:
        """The value, or its text as written when it is a plain non-string scalar."""
        return self.raw.get(key, self.get(key))


class YList(list[Any]):
    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.item_lines: list[int] = []
        self.raw: dict[int, str] = {}

    def text(self, index: int) -> Any:
        return self.raw.get(index, self[index])


def _as_written(node: Any, value: object) -> str | None:
    """The text of a plain scalar that YAML resolved to a bool, a number or a timestamp."""
    if (isinstance(node, yaml.ScalarNode) and node.style is None
            and isinstance(value, bool | int | float | date)):
        return str(node.value)
    return None


MAX_NODES = 200_000  # aliases expand into copies: a bound on what one file may unfold to


class _TooLarge(Exception):
    pass


def _located(node: Any, constructor: Any, file: str, issues: Issues,
             path: tuple[int, ...] = (), budget: list[int] | None = None) -> Any:
    """``node`` as plain values, mappings as YMap and sequences as YList (with lines)."""
    budget = [MAX_NODES] if budget is None else budget
    budget[0] -= 1
    line = int(node.start_mark.line) + 1
    if budget[0] < 0:
        raise _TooLarge
    if id(node) in path:
        issues.add(Where(file, line), "", "an alias refers to a node that contains it")
        return None
    path = (*path, id(node))
    if isinstance(node, yaml.MappingNode):
        constructor.flatten_mapping(node)  # `<<: *anchor` merges
        mapping = YMap(line)
        for key_node, value_node in node.value:
            key_line = int(key_node.start_mark.line) + 1
            if not isinstance(key_node, yaml.ScalarNode):
                issues.add(Where(file, key_line), "", "a key must be a plain word")
                continue
            key = str(key_node.value)
            if key in mapping:
                issues.add(Where(file, key_line), key,
                           f"is given twice (first at line {mapping.key_lines[key]})")
                continue
            mapping[key] = _located(value_node, constructor, file, issues, path, budget)
            mapping.key_lines[key] = key_line
            written = _as_written(value_node, mapping[key])
            if written is not None:
                mapping.raw[key] = written
        return mapping
    if isinstance(node, yaml.SequenceNode):
        items = YList(line)
        for item in node.value:
            items.append(_located(item, constructor, file, issues, path, budget))
            items.item_lines.append(int(item.start_mark.line) + 1)
            written = _as_written(item, items[-1])
            if written is not None:
                items.raw[len(items) - 1] = written
        return items
    return constructor.construct_object(node, deep=True)


def read_documents(text: str, file: str, issues: Issues) -> list[YMap]:
    """The YAML documents of one file, with lines; syntax errors go to ``issues``."""
    constructor = yaml.SafeLoader("")
    documents: list[YMap] = []
    try:
        for node in yaml.compose_all(text, Loader=yaml.SafeLoader):
            if node is None:
                continue  # an empty document (a trailing ---)
            value = _located(node, constructor, file, issues)
            if not isinstance(value, YMap):
                issues.add(Where(file, int(node.start_mark.line) + 1), "",
                           "a document must be a mapping (apiVersion, project, tasks, triggers)")
                continue
            documents.append(value)
    except yaml.MarkedYAMLError as exc:
        mark, context = exc.problem_mark, exc.context_mark
        if mark is None or (context is not None and mark.line >= len(text.splitlines())):
            mark = context  # the problem is the end of the file: name where it began
        detail = str(exc.problem or "")
        if exc.context and context is not None:
            detail += f" ({exc.context} at line {int(context.line) + 1})"
        where = Where(file, int(mark.line) + 1 if mark is not None else None)
        issues.add(where, "", f"not valid YAML: {detail}")
    except yaml.YAMLError as exc:
        issues.add(Where(file), "", f"not valid YAML: {exc}")
    except _TooLarge:
        issues.add(Where(file), "", f"unfolds to more than {MAX_NODES} values (aliases?)")
    return documents


# --- reading mappings with friendly type errors ------------------------------------------


def _type_name(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


class _Fields:
    """One mapping of the file: typed reads that report to ``issues`` with file and line."""

    def __init__(self, mapping: YMap, file: str, path: str, issues: Issues,
                 allowed: Sequence[str]) -> None:
        self.map = mapping
        self.file = file
        self.path = path
        self.issues = issues
        self.ok = True
        for key in mapping:
            if key not in allowed:
                self.fail(key, "unknown key (expected one of " + ", ".join(allowed) + ")")

    def where(self, key: str | None = None) -> Where:
        return Where(self.file, self.map.key_lines.get(key, self.map.line) if key else
                     self.map.line)

    def name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str, message: str, *, where: Where | None = None) -> None:
        self.ok = False
        self.issues.add(where or self.where(key), self.name(key), message)

    def attempt(self, key: str, make: Callable[[], T]) -> T | None:
        """``make()``, with a domain refusal reported at ``key``."""
        try:
            return make()
        except InvalidInput as exc:
            self.fail(key, exc.rule)
            return None

    def _typed(self, key: str, kind: type | tuple[type, ...], what: str) -> Any:
        value = self.map.get(key)
        if value is None:
            return None
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            self.fail(key, f"must be {what}, not true/false")
            return None
        if not isinstance(value, kind):
            hint = " (quote it)" if what == "a string" else ""
            self.fail(key, f"must be {what}, not {_type_name(value)}{hint}")
            return None
        return value

    def text(self, key: str, *, required: bool = False) -> str | None:
        """A text field: a plain ``off``, ``true`` or ``8080`` is taken as written."""
        if key in self.map.raw:
            return self.map.raw[key]
        value = self._typed(key, str, "a string")
        if value is None and required and self.map.get(key) is None:
            self.fail(key, "is required", where=self.where(key if key in self.map else None))
        return value  # type: ignore[no-any-return]

    def flag(self, key: str, default: bool) -> bool:
        value = self._typed(key, bool, "true or false")
        return default if value is None else bool(value)

    def number(self, key: str) -> int | None:
        return self._typed(key, int, "an integer")  # type: ignore[no-any-return]

    def duration(self, key: str) -> int | None:
        if isinstance(self.map.get(key), int | float) and not isinstance(self.map.get(key), bool):
            self.fail(key, "must be a duration with a unit, e.g. 30s, 5m, 1h30m")
            return None
        text = self.text(key)
        if text is None:
            return None
        try:
            return parse_duration(text)
        except ValueError as exc:
            self.fail(key, str(exc))
            return None

    def mapping(self, key: str) -> YMap | None:
        return self._typed(key, YMap, "a mapping")  # type: ignore[no-any-return]

    def items(self, key: str) -> YList | None:
        return self._typed(key, YList, "a list")  # type: ignore[no-any-return]


# --- documents -> the model ----------------------------------------------------------------


def _document(doc: YMap, file: str, issues: Issues) -> DesiredProject | None:
    fields = _Fields(doc, file, "", issues, DOCUMENT_KEYS)
    version = doc.get("apiVersion")
    if version is None:
        fields.fail("apiVersion", f"is required: write apiVersion: {API_VERSION} first",
                    where=fields.where())
    elif version != API_VERSION:
        fields.fail("apiVersion", f"must be {API_VERSION} (got {version!r})")
    pid = fields.text("project", required=True)
    if pid is not None:
        fields.attempt("project", lambda: project_id(pid))
    name = fields.text("name")
    if name is not None:
        fields.attempt("name", lambda: display_name(name))
    project = DesiredProject(project_id=pid or "-", name=name, where=fields.where("project"))
    for task_id, value, where in _entries(fields, "tasks", "task", "shell or argv, env, ..."):
        task = _task(project.project_id, task_id, value, file, issues, where)
        if task is None:
            fields.ok = False
        else:
            project.tasks[task_id] = task
    for trigger_id, value, where in _entries(fields, "triggers", "trigger",
                                             "task, cron, timezone, ..."):
        trigger = _trigger(project.project_id, trigger_id, value, file, issues, where)
        if trigger is None:
            fields.ok = False
        else:
            project.triggers[trigger_id] = trigger
    return project if fields.ok else None


def _entries(fields: _Fields, key: str, kind: str, holds: str
             ) -> list[tuple[str, YMap, Where]]:
    """The (id, mapping, where) of each task or trigger; bad ids and values reported."""
    entries = []
    section = fields.mapping(key)
    for ident, value in (section or {}).items():
        assert section is not None
        where = Where(fields.file, section.key_lines[ident])
        try:
            entity_id(ident, kind)
        except InvalidInput as exc:
            fields.fail(f"{key}.{ident}", f"{kind} id {exc.rule}", where=where)
            continue
        if not isinstance(value, YMap):
            fields.fail(f"{key}.{ident}", f"must be a mapping ({holds}), not "
                        f"{_type_name(value)}", where=where)
            continue
        entries.append((ident, value, where))
    return entries


def _command(fields: _Fields) -> ArgvCommand | ShellCommand | None:
    shell, argv = fields.map.get("shell"), fields.map.get("argv")
    if shell is not None and argv is not None:
        fields.fail("argv", "give either shell or argv, not both")
        return None
    if shell is None and argv is None:
        fields.fail("shell", "a task needs shell: COMMAND or argv: [/PROGRAM, ARGS...]",
                    where=fields.where())
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
            fields.fail(f"argv[{index}]", f"must be a string, not {_type_name(word)}",
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


def _env(fields: _Fields) -> tuple[EnvValue, ...]:
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
        else:
            fields.fail(key, f"must be a string or {{from_env: VARIABLE}}, not "
                        f"{_type_name(raw)}", where=where)
    return tuple(values)


def _retry(fields: _Fields) -> RetryPolicy:
    retry = fields.mapping("retry")
    if retry is None:
        return RetryPolicy()
    sub = _Fields(retry, fields.file, fields.name("retry"), fields.issues, RETRY_KEYS)
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


def _task(project: str, task_id: str, mapping: YMap, file: str, issues: Issues,
          where: Where | None) -> DesiredTask | None:
    fields = _Fields(mapping, file, f"tasks.{task_id}", issues, TASK_KEYS)
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
    enabled = fields.flag("enabled", True)
    if command is None or not fields.ok:
        return None
    task = DesiredTask(
        project_id=project, task_id=task_id, name=task_id if name is None else name,
        command=command, env=env, working_directory=cwd,
        timeout_ms=DEFAULT_TIMEOUT_MS if timeout is None else timeout, retry=retry,
        idempotent=idempotent, concurrency=concurrency, enabled=enabled, where=where,
        path=f"tasks.{task_id}",
        lines={key: Where(file, line) for key, line in mapping.key_lines.items()})
    try:  # every bound of the spec, before any value is read from the environment
        CommandSpec(command=command,
                    environment=tuple(EnvEntry(name=e.name, value=e.value or "") for e in env),
                    working_directory=cwd, timeout_ms=task.timeout_ms, retry=retry,
                    idempotent=idempotent, concurrency=concurrency)
    except InvalidInput as exc:
        key = spec_key(exc.field)
        issues.add(task.at(key), task.field_name(key), exc.rule)
        return None
    return task


def _schedule(fields: _Fields, zone: str | None) -> tuple[ScheduleKind | None, bool]:
    """The trigger's schedule (exactly one of cron, every with anchor, at) and whether an
    interval's anchor is left to the publish (see DesiredTrigger.keep_anchor)."""
    given = [key for key in ("cron", "every", "at") if key in fields.map]
    if len(given) != 1:
        message = ("needs a schedule: cron, every or at" if not given
                   else f"give one schedule, not {' and '.join(given)}")
        fields.fail(given[-1] if given else "cron", message,
                    where=fields.where(given[-1]) if given else fields.where())
        return None, False
    if "anchor" in fields.map and given != ["every"]:
        fields.fail("anchor", "applies only to every")
        return None, False
    for key in ("dst_gap", "dst_overlap"):
        if key in fields.map and given != ["cron"]:
            fields.fail(key, "applies only to cron (every and at follow real elapsed time)")
            return None, False
    if given == ["cron"]:
        cron = fields.text("cron", required=True)
        expression = None if cron is None else fields.attempt(
            "cron", lambda: normalize_expression(cron))
        try:
            dst = DstPolicy.parse(fields.text("dst_gap"), fields.text("dst_overlap"))
        except InvalidInput as exc:
            fields.fail(exc.field.replace("-", "_"), exc.rule)
            return None, False
        if expression is None or zone is None:
            return None, False
        try:
            check_dst_applies(expression, dst)
        except InvalidInput as exc:
            fields.fail("dst_gap" if dst.gap is not DstGap.SHIFT else "dst_overlap",
                        exc.rule.replace("--dst-gap shift --dst-overlap first",
                                         "dst_gap: shift and dst_overlap: first"))
            return None, False
        return CronSchedule(expression, zone, dst), False
    zone = zone or UTC_NAME
    if given == ["at"]:
        text = fields.text("at", required=True)
        at_ms = None if text is None else fields.attempt("at", lambda: parse_instant(text, "at"))
        return (None if at_ms is None else OnceSchedule(at_ms, zone)), False
    every_ms = fields.duration("every")
    if every_ms is None:
        return None, False
    if every_ms % 1000:
        fields.fail("every", "must be whole seconds")
        return None, False
    every_s = fields.attempt("every", lambda: check_every(every_ms // 1000))
    anchor_text = fields.text("anchor")
    anchor_ms = 0 if anchor_text is None else fields.attempt(
        "anchor", lambda: parse_instant(anchor_text, "anchor"))
    if every_s is None or anchor_ms is None:
        return None, False
    return IntervalSchedule(every_s, anchor_ms, zone), anchor_text is None


def _jitter(fields: _Fields) -> Jitter | None:
    """``jitter`` (the bound) and ``jitter_random`` (its per-occurrence part), whole seconds."""
    seconds = []
    for key in ("jitter", "jitter_random"):
        value = fields.duration(key)
        if value is not None and value % 1000:
            fields.fail(key, "must be whole seconds")
            value = None
        seconds.append(None if value is None else value // 1000)
    bound, random = seconds
    if bound is None:
        if random is not None:
            fields.fail("jitter_random", "is a part of jitter: give jitter too")
        return None
    try:
        return Jitter.of(bound, random or 0)
    except InvalidInput as exc:
        fields.fail(exc.field.replace("-", "_"), exc.rule.replace("--jitter", "jitter"))
        return None


def _trigger(project: str, trigger_id: str, mapping: YMap, file: str, issues: Issues,
             where: Where | None) -> DesiredTrigger | None:
    fields = _Fields(mapping, file, f"triggers.{trigger_id}", issues, TRIGGER_KEYS)
    task_id = fields.text("task", required=True)
    if task_id is not None:
        fields.attempt("task", lambda: entity_id(task_id, "task"))
    zone_text = fields.text("timezone", required="cron" in mapping)
    zone = None if zone_text is None else fields.attempt(
        "timezone", lambda: canonical_timezone(zone_text))
    schedule, keep_anchor = _schedule(fields, zone)
    misfire_text = fields.text("misfire")
    misfire = fields.attempt("misfire", lambda: MisfirePolicy.parse(misfire_text or "skip"))
    overlap_text = fields.text("overlap")
    policy = fields.attempt("overlap", lambda: OverlapPolicy.parse(overlap_text or "allow"))
    limit = fields.number("overlap_queue_limit")
    overlap = None
    if policy is not None:
        try:
            overlap = Overlap(policy=policy,
                              queue_limit=DEFAULT_QUEUE_LIMIT if limit is None else limit)
        except InvalidInput as exc:
            fields.fail("overlap_queue_limit", exc.rule.replace("--overlap queue",
                                                                "overlap: queue"))
    enabled = fields.flag("enabled", True)
    jitter = _jitter(fields)
    if (not fields.ok or task_id is None or schedule is None or misfire is None
            or overlap is None):
        return None
    spec = TriggerSpec(schedule=schedule, misfire_policy=misfire, overlap=overlap, jitter=jitter)
    return DesiredTrigger(
        project_id=project, trigger_id=trigger_id, task_id=task_id, spec=spec, enabled=enabled,
        keep_anchor=keep_anchor, where=where, path=f"triggers.{trigger_id}",
        lines={key: Where(file, line) for key, line in mapping.key_lines.items()})


# --- files -------------------------------------------------------------------------------


def read_sources(paths: Iterable[str], issues: Issues) -> list[tuple[str, str]]:
    """(name, text) of every file: a file as given, a directory's *.yaml and *.yml files
    (sorted by name, not recursive), ``-`` for standard input."""
    sources: list[tuple[str, str]] = []
    for given in paths:
        if given == "-":
            sources.append(("<stdin>", sys.stdin.read()))
            continue
        path = Path(given)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())
            if not files:
                issues.add(Where(given), "", "the directory holds no *.yaml or *.yml file")
        elif path.exists():
            files = [path]
        else:
            issues.add(Where(given), "", "no such file or directory")
            continue
        for file in files:
            name = given if file == path else str(Path(given) / file.name)
            try:
                sources.append((name, file.read_text(encoding="utf-8")))
            except UnicodeDecodeError:
                issues.add(Where(name), "", "is not UTF-8 text")
            except OSError as exc:
                issues.add(Where(name), "", f"cannot be read ({exc.strerror})")
    return sources


def load_definitions(paths: Sequence[str]) -> Definitions:
    """Read, check and merge the definitions in ``paths``; DefinitionErrors lists every
    problem found (nothing has been written)."""
    issues = Issues()
    sources = read_sources(paths, issues)
    documents = []
    for name, text in sources:
        for doc in read_documents(text, name, issues):
            project = _document(doc, name, issues)
            if project is not None:
                documents.append(project)
    issues.raise_any()
    if not documents:
        issues.add(Where(", ".join(paths)), "", "defines no project")
    definitions = merge_projects(documents, issues)
    issues.raise_any()
    return definitions


def parse_text(text: str, name: str = "<text>") -> Definitions:
    """Definitions from one YAML text (for the API and tests)."""
    issues = Issues()
    documents = [p for doc in read_documents(text, name, issues)
                 if (p := _document(doc, name, issues)) is not None]
    issues.raise_any()
    definitions = merge_projects(documents, issues)
    issues.raise_any()
    return definitions


# --- the model -> YAML ---------------------------------------------------------------------


class _Flow(list[Any]):
    """A list written on one line: ``[/bin/echo, hi]``."""


class _FlowMap(dict[str, Any]):
    """A mapping written on one line: ``{from_env: TOKEN}``."""


class _Dumper(yaml.SafeDumper):  # type: ignore[misc, unused-ignore]
    pass


def _represent_str(dumper: Any, data: str) -> Any:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(_Flow, lambda d, v: d.represent_sequence(
    "tag:yaml.org,2002:seq", list(v), flow_style=True))
_Dumper.add_representer(_FlowMap, lambda d, v: d.represent_mapping(
    "tag:yaml.org,2002:map", dict(v), flow_style=True))


def task_document(task: DesiredTask) -> dict[str, Any]:
    """A task as the file writes it: defaults left out."""
    doc: dict[str, Any] = {}
    if task.name != task.task_id:
        doc["name"] = task.name
    if isinstance(task.command, ShellCommand):
        doc["shell"] = task.command.command
        if task.command.shell == "/bin/bash":
            doc["bash"] = True
    else:
        doc["argv"] = _Flow(task.command.argv())
    if task.env:
        doc["env"] = {e.name: _FlowMap(from_env=e.from_env) if e.from_env else e.value
                      for e in task.env}
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
    if not trigger.enabled:
        doc["enabled"] = False
    return doc


def project_document(project: DesiredProject) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": API_VERSION, "project": project.project_id}
    if project.name is not None and project.name != project.project_id:
        doc["name"] = project.name
    doc["tasks"] = {t: task_document(project.tasks[t]) for t in sorted(project.tasks)}
    doc["triggers"] = {t: trigger_document(project.triggers[t]) for t in sorted(project.triggers)}
    return doc


EXPORT_HEADER = """\
# qinglong definitions: apply with `ql apply -f FILE` (docs/controls/apply.md).
# Environment values are write-only, so each entry reads {from_env: NAME}: the value of NAME
# in the environment of `ql apply`, or, when NAME is not set, the value stored now.
"""


def dump_projects(projects: Sequence[DesiredProject], header: str = EXPORT_HEADER) -> str:
    """The projects as a YAML stream, one document each."""
    body = yaml.dump_all([project_document(p) for p in projects], Dumper=_Dumper,
                         sort_keys=False, allow_unicode=True, default_flow_style=False,
                         explicit_start=True, width=1_000_000_000)
    return header + str(body)
