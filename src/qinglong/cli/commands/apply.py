"""`ql apply`, `ql export`, `ql import crontab`: definitions kept in files (docs/controls/apply.md)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import click

from qinglong.cli.context import CLOCK, services
from qinglong.cli.output import emit_json, say, warn
from qinglong.cli.params import DURATION, database_url_option, json_option
from qinglong.errors import InvalidInput
from qinglong.service.crontab import crontab_definitions
from qinglong.service.definition_model import DefinitionErrors, Definitions
from qinglong.service.definition_plan import Action, ApplyStopped, Change, Plan
from qinglong.service.env_changes import LABELS
from qinglong.service.errors import EXIT_BAD_INPUT, exit_code_for, problem
from qinglong.service.views.definitions import change_view, plan_view

_DONE = {
    Action.CREATE: "created", Action.CHANGE: "changed", Action.RESTORE: "restored",
    Action.ENABLE: "enabled", Action.DISABLE: "disabled", Action.UNCHANGED: "unchanged",
    Action.KEPT: "not in the files, left as it is (--prune disables it)",
}
_WOULD = {
    Action.CREATE: "would create", Action.CHANGE: "would change",
    Action.RESTORE: "would restore", Action.ENABLE: "would enable",
    Action.DISABLE: "would disable", Action.UNCHANGED: "unchanged",
    Action.KEPT: _DONE[Action.KEPT],
}


def _value(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, str) and value in LABELS:
        return value
    return json.dumps(value, ensure_ascii=False)


def _change_lines(change: Change, *, dry_run: bool) -> list[str]:
    if change.kind == "project" and change.action is Action.UNCHANGED:
        return []
    verb = (_WOULD if dry_run else _DONE)[change.action]
    notes = []
    if change.kind != "project" and change.revision is not None:
        notes.append(f"now revision {change.revision}" if dry_run else
                     f"revision {change.revision}")
    if change.pruned:
        notes.append("--prune: no longer in the files")
    head = f"{change.kind} {change.label}: {verb}" + (f" ({'; '.join(notes)})" if notes else "")
    lines = [head]
    for item in change.fields:
        if change.action is Action.CREATE:
            lines.append(f"    {item.field}: {_value(item.after)}")
        else:
            lines.append(f"    {item.field}: {_value(item.before)} -> {_value(item.after)}")
    if change.repinned:
        lines.append("    re-pinned triggers: " + ", ".join(change.repinned))
    return lines


def _summary(plan: Plan, *, dry_run: bool) -> str:
    counts = plan.counts()
    order = (Action.CREATE, Action.CHANGE, Action.RESTORE, Action.ENABLE, Action.DISABLE)
    done = [f"{counts[a.value]} {_DONE[a]}" for a in order if counts[a.value]]
    tail = f"{counts[Action.UNCHANGED.value]} unchanged"
    if counts[Action.KEPT.value]:
        tail += f", {counts[Action.KEPT.value]} not in the files"
    if dry_run:
        would = [f"{_WOULD[a].removeprefix('would ')} {counts[a.value]}"
                 for a in order if counts[a.value]]
        text = ("would " + ", ".join(would)) if would else "nothing would change"
        return f"dry run: {text}; {tail}; nothing was written"
    return ("applied: " + ", ".join(done) + f"; {tail}") if done else f"nothing to change: {tail}"


def _fail_issues(exc: DefinitionErrors, as_json: bool) -> NoReturn:
    if as_json:
        body = {**problem(exc), "issues": [issue.to_json() for issue in exc.issues]}
        click.echo(json.dumps({"error": body}, sort_keys=True), err=True)
    else:
        for issue in exc.issues:
            click.echo(str(issue), err=True)
        count = len(exc.issues)
        click.echo(f"ql: {count} problem{'s' if count > 1 else ''} in the definitions; "
                   "nothing was written", err=True)
    raise click.exceptions.Exit(EXIT_BAD_INPUT)


def _fail_stopped(exc: ApplyStopped, as_json: bool) -> NoReturn:
    change = exc.change
    source = f" ({change.where})" if change.where else ""
    if as_json:
        body = {**problem(exc.cause), "in_doubt": exc.in_doubt,
                "stopped_at": change_view(change).to_json(),
                "written": [change_view(c).to_json() for c in exc.written],
                "not_written": [change_view(c).to_json() for c in exc.not_written]}
        click.echo(json.dumps({"error": body}, sort_keys=True), err=True)
    else:
        click.echo(f"ql: apply stopped at {change.kind} {change.label}{source}: "
                   f"{exc.cause.message}", err=True)
        if exc.in_doubt:
            fate = (f"whether project {change.project_id} was written is unknown (the reply to "
                    "its COMMIT was lost)")
            rest = "were not or are in doubt"
        else:
            fate, rest = f"project {change.project_id} was rolled back whole", "were not"
        click.echo(f"ql: {fate}; {len(exc.written)} change(s) of the projects before it were "
                   f"written and {len(exc.not_written)} {rest}; once the cause is fixed, apply "
                   "again (it writes only what still differs)", err=True)
    raise click.exceptions.Exit(exit_code_for(exc.cause))


def _apply(definitions: Definitions, *, database_url: str, dry_run: bool, prune: bool,
           as_json: bool, notes: Sequence[str] | None = None) -> None:
    """Plan (checking everything), then print the plan (--dry-run) or write it. ``notes``
    (what an import decided) go to stderr, or into the JSON object."""
    if notes is not None and not as_json:
        for note in notes:
            warn(f"note: {note}")
    with services(database_url) as opened:
        service = opened.declarative
        try:
            plan = service.plan(definitions, prune=prune, environ=os.environ,
                                cwd_must_exist=opened.commands_run_here, now_ms=CLOCK.now_ms())
        except DefinitionErrors as exc:
            _fail_issues(exc, as_json)
        if not dry_run:
            def show(change: Change) -> None:
                for line in _change_lines(change, dry_run=False):
                    say(line)

            try:
                service.apply(plan, on_change=None if as_json else show)
            except ApplyStopped as exc:
                _fail_stopped(exc, as_json)
    if as_json:
        emit_json(plan_view(plan, dry_run=dry_run, prune=prune, notes=notes))
        return
    if dry_run:
        for change in plan.changes:
            for line in _change_lines(change, dry_run=True):
                say(line)
    say(_summary(plan, dry_run=dry_run))


_DRY_RUN = click.option("--dry-run", is_flag=True,
                        help="Print what would change, field by field, and write nothing.")
_PRUNE = click.option("--prune", is_flag=True,
                      help="Disable (never delete) the tasks and triggers of the projects named "
                           "that the definitions no longer name.")


@click.command("apply")
@click.option("-f", "--filename", "paths", multiple=True, required=True, metavar="FILE|DIR",
              help="A YAML file, a directory of *.yaml/*.yml files (sorted by name), or - for "
                   "standard input (repeatable).")
@_DRY_RUN
@_PRUNE
@database_url_option
@json_option
def apply(paths: tuple[str, ...], dry_run: bool, prune: bool, database_url: str,
          as_json: bool) -> None:
    """Make projects, tasks, triggers and flows what the YAML definitions say.

    Every file is read and checked first (with the same rules as `ql task publish` and `ql
    trigger publish`), then what is stored is compared field by field: an unchanged task or
    trigger publishes nothing, a changed one one new revision. A problem anywhere is
    reported as FILE:LINE: FIELD: RULE, and then nothing is written. An environment entry
    is a plain value, or a secret: {from_env: NAME} reads NAME from this command's
    environment (or keeps the stored value when NAME is not set), {secret: stored} keeps the
    stored value and never reads the environment.
    """
    from qinglong.service.definition_yaml import load_definitions  # PyYAML only when needed

    try:
        definitions = load_definitions(paths)
    except DefinitionErrors as exc:
        _fail_issues(exc, as_json)
    _apply(definitions, database_url=database_url, dry_run=dry_run, prune=prune,
           as_json=as_json)


def _write_file(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` in one step (a reader never sees half a file)."""
    target = Path(path)
    try:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=target.parent or ".",
                                         prefix=f".{target.name}.", delete=False) as out:
            out.write(text)
        os.replace(out.name, target)
    except OSError as exc:
        raise InvalidInput("output", f"cannot write {path!r} ({exc.strerror})") from None


@click.command("export")
@click.option("--project", "projects", multiple=True, metavar="PROJECT",
              help="Only this project (repeatable; default: every project that is not archived).")
@click.option("-o", "--output", metavar="FILE", help="Write to FILE instead of standard output.")
@database_url_option
def export(projects: tuple[str, ...], output: str | None, database_url: str) -> None:
    """Write the stored projects, tasks, triggers and flows in the format `ql apply` reads.

    Deleted tasks and triggers are left out. Plain environment values are written as they
    are; a secret is written as {secret: stored} (never its value), and a note names it.
    Applying the file changes nothing, here or, with its secrets given as {from_env: VAR},
    on another database.
    """
    from qinglong.service.definition_yaml_write import dump_projects

    with services(database_url) as opened:
        exported, notes = opened.declarative.export(list(projects) or None)
    text = dump_projects(exported)
    for note in notes:
        warn(f"note: {note}")
    if not exported:
        warn("note: there is no project to export")
    if output is None:
        click.echo(text, nl=False)
        return
    _write_file(output, text)
    tasks = sum(len(p.tasks) for p in exported)
    triggers = sum(len(p.triggers) for p in exported)
    say(f"wrote {len(exported)} project(s), {tasks} task(s) and {triggers} trigger(s) "
        f"to {output}")


@click.group("import")
def import_group() -> None:
    """Turn another scheduler's definitions into projects, tasks and triggers."""


def _read_text(path: str) -> tuple[str, str]:
    if path == "-":
        return "<stdin>", sys.stdin.read()
    try:
        return path, Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("file", f"{path!r} is not UTF-8 text") from None
    except OSError as exc:
        raise InvalidInput("file", f"cannot read {path!r} ({exc.strerror})") from None


@import_group.command("crontab")
@click.argument("file", metavar="FILE")
@click.option("--project", required=True, metavar="PROJECT",
              help="The project the jobs go to (created if it does not exist).")
@click.option("--timezone", required=True, metavar="ZONE",
              help="IANA time zone the schedules are read in (a CRON_TZ= line overrides it).")
@click.option("--name", metavar="NAME", help="Display name of the project, if it is created.")
@click.option("--timeout", type=DURATION, metavar="DURATION",
              help="Every job's timeout, e.g. 30m (default: none, as in cron: 365d, the "
                   "longest a task may have).")
@_DRY_RUN
@_PRUNE
@click.option("-o", "--output", metavar="FILE",
              help="Write the definitions as YAML to FILE (for ql apply) instead of applying "
                   "them; the database is not opened.")
@database_url_option
@json_option
def crontab(file: str, project: str, timezone: str, name: str | None, timeout: int | None,
            dry_run: bool, prune: bool, output: str | None, database_url: str,
            as_json: bool) -> None:
    """Import a crontab (FILE, or - for standard input, e.g. `crontab -l | ql import crontab -`).

    Each job line becomes a shell task and a trigger with the same stable id (cron- and a
    hash of its schedule and command, so importing again changes nothing). NAME=value lines
    set the environment of the jobs below them; SHELL= picks /bin/sh or /bin/bash; CRON_TZ=
    the zone; MAILTO= and cron's other settings are not imported. Jobs get no timeout (as in
    cron) unless --timeout gives one. What became of each of these lines is printed as a
    note. @hourly, @daily, @weekly, @monthly, @yearly work; @reboot is refused. A bad line is
    reported as FILE:LINE and nothing is written.
    """
    source, text = _read_text(file)
    try:
        imported = crontab_definitions(text, source, project, timezone, name, timeout)
    except DefinitionErrors as exc:
        _fail_issues(exc, as_json)
    definitions = imported.definitions
    if output is not None:
        from qinglong.service.definition_yaml_write import dump_projects

        for note in imported.notes:
            warn(f"note: {note}")
        header = "".join(f"# {note}\n" for note in imported.notes)
        _write_file(output, dump_projects(
            list(definitions.projects.values()),
            header=f"# imported from {source} by `ql import crontab`; apply with "
                   f"`ql apply -f FILE`\n{header}"))
        count = len(definitions.projects[project].tasks)
        say(f"wrote {count} task(s) and {count} trigger(s) of project {project} to {output}")
        return
    _apply(definitions, database_url=database_url, dry_run=dry_run, prune=prune,
           as_json=as_json, notes=imported.notes)

