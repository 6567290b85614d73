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
refused (a typo never silently becomes a default). The located YAML values are in
``definition_yaml_nodes``, the tasks and triggers in ``definition_yaml_tasks`` and
``definition_yaml_triggers``, the writer in ``definition_yaml_write``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from qinglong.domain.identifiers import display_name, entity_id, project_id
from qinglong.errors import InvalidInput
from qinglong.service.definition_flows import parse_flow_entry
from qinglong.service.definition_model import (
    API_VERSION,
    Definitions,
    DesiredProject,
    Issues,
    Where,
    merge_projects,
)
from qinglong.service.definition_yaml_nodes import Fields, YMap, read_documents, type_name
from qinglong.service.definition_yaml_tasks import parse_task
from qinglong.service.definition_yaml_triggers import parse_trigger

SUFFIXES = (".yaml", ".yml")
DOCUMENT_KEYS = ("apiVersion", "project", "name", "tasks", "triggers", "flows")


# --- documents -> the model ----------------------------------------------------------------


def _document(doc: YMap, file: str, issues: Issues) -> DesiredProject | None:
    fields = Fields(doc, file, "", issues, DOCUMENT_KEYS)
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
        task = parse_task(project.project_id, task_id, value, file, issues, where)
        if task is None:
            fields.ok = False
        else:
            project.tasks[task_id] = task
    for trigger_id, value, where in _entries(fields, "triggers", "trigger",
                                             "task, cron, timezone, ..."):
        trigger = parse_trigger(project.project_id, trigger_id, value, file, issues, where)
        if trigger is None:
            fields.ok = False
        else:
            project.triggers[trigger_id] = trigger
    for flow_id, value, where in _entries(fields, "flows", "flow", "nodes, failure, timeout"):
        flow = parse_flow_entry(project.project_id, flow_id, value, where, issues)
        if flow is None:
            fields.ok = False
        else:
            project.flows[flow_id] = flow
    return project if fields.ok else None


def _entries(fields: Fields, key: str, kind: str, holds: str
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
                        f"{type_name(value)}", where=where)
            continue
        entries.append((ident, value, where))
    return entries


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

