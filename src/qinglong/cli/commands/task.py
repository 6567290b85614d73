"""`ql task`: publish, inspect, enable, disable and delete tasks (what to run)."""

from __future__ import annotations

from typing import Any

import click

from qinglong.cli.context import catalog, respond
from qinglong.cli.output import emit_json, emit_table, say, warn, when
from qinglong.cli.params import (
    DURATION,
    database_url_option,
    json_option,
    project_option,
)
from qinglong.cli.targets import add_delete_command, add_switch_commands
from qinglong.cli.task_args import retry_changes, secret_entries
from qinglong.cli.task_text import (
    change_text,
    command_text,
    cpu_text,
    cwd_text,
    limit_text,
    memory_text,
    parameters_text,
    requires_text,
    retry_text,
    timeout_text,
)
from qinglong.domain.limits import parse_size, whole_seconds
from qinglong.domain.parameters import parameters_change
from qinglong.domain.placement import requirements_change
from qinglong.domain.publishing import TaskPatch
from qinglong.domain.retry import DEFAULT_BACKOFF_MS, DEFAULT_MAX_BACKOFF_MS, MAX_ATTEMPTS
from qinglong.domain.scripts import ScriptRef
from qinglong.domain.task import (
    DEFAULT_TIMEOUT_MS,
    MAX_CONCURRENCY,
    ArgvCommand,
    ShellCommand,
    environment_from_pairs,
)
from qinglong.errors import InvalidInput
from qinglong.profiles.open import commands_run_here
from qinglong.service.catalog import TaskPublishRequest
from qinglong.service.views.tasks import TaskDiffView, TaskPublishView, TaskShowView, TaskView
from qinglong.service.working_directory import check_directory_here


@click.group()
def task() -> None:
    """Tasks say what to run: a command with its environment, directory and timeout."""


def task_option(func: Any) -> Any:
    return click.option("--task", "task_id", required=True, metavar="TASK", help="Task id.")(func)


class _PublishCommand(click.Command):
    """Remembers whether ``--`` separated the program's words from ql's options."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["ql.double_dash"] = "--" in args
        return super().parse_args(ctx, args)


def _misplaced_option(words: tuple[str, ...]) -> str | None:
    """A word after the program that is one of this command's own options (forgotten order)."""
    ctx = click.get_current_context()
    if ctx.meta.get("ql.double_dash"):
        return None
    options = {opt for param in ctx.command.params for opt in (*param.opts, *param.secondary_opts)
               if opt.startswith("-")}
    for word in words[1:]:
        if word.split("=", 1)[0] in options:
            return word
    return None


def _script(path: str, interpreter: str | None, words: tuple[str, ...]) -> ScriptRef:
    misplaced = _misplaced_option(words)
    if misplaced is not None:
        raise InvalidInput("script", f"{misplaced!r} after the script is an option of this "
                                     "command: put options before --script's arguments, or "
                                     "write -- before the arguments")
    return ScriptRef(path=path, interpreter=interpreter, args=words)


def _command(shell: str | None, bash: bool, sh: bool, argv: bool, script: str | None,
             interpreter: str | None,
             words: tuple[str, ...]) -> ArgvCommand | ShellCommand | ScriptRef | None:
    """The command the options give (None: keep the current one). Without --bash or --sh a
    shell command says /bin/sh here; the publish keeps an existing shell task's interpreter."""
    if sum((argv, shell is not None, script is not None)) > 1:
        raise InvalidInput("command", "give one of --shell, --argv or --script")
    if interpreter is not None and script is None:
        raise InvalidInput("interpreter", "--interpreter only applies to --script")
    if script is not None:
        return _script(script, interpreter, words)
    if bash and sh:
        raise InvalidInput("sh", "give either --bash or --sh, not both")
    if shell is not None:
        if words:
            raise InvalidInput("command", f"unexpected argument {words[0]!r} after --shell")
        return ShellCommand(command=shell, shell="/bin/bash" if bash else "/bin/sh")
    if bash:
        raise InvalidInput("bash", "--bash only applies to --shell")
    if sh:
        raise InvalidInput("sh", "--sh only applies to --shell")
    if not argv:
        if words:
            raise InvalidInput("argv", f"unexpected argument {words[0]!r}: write --argv before "
                                       "the program, or use --shell 'COMMAND'")
        return None  # keep the current command
    if not words:
        raise InvalidInput("argv", "needs an absolute program path, e.g. --argv /bin/echo hi")
    misplaced = _misplaced_option(words)
    if misplaced is not None:
        raise InvalidInput("argv", f"{misplaced!r} after the program is an option of this command: "
                                   "put options before the program, or write -- before the program "
                                   "to pass it to the program as an argument")
    return ArgvCommand(file=words[0], args=tuple(words[1:]))


def _check_cwd_here(cwd: str | None, database_url: str) -> None:
    """On SQLite the commands run on this host, so a working directory must exist here."""
    check_directory_here(cwd, commands_run_here(database_url))


@task.command(cls=_PublishCommand, context_settings={"allow_interspersed_args": False})
@project_option
@task_option
@click.option("--shell", metavar="COMMAND",
              help="Run COMMAND with /bin/sh -c, or /bin/bash -c with --bash (a shell task "
                   "keeps its current interpreter unless --bash or --sh is given).")
@click.option("--bash", is_flag=True, help="Use /bin/bash for --shell.")
@click.option("--sh", is_flag=True, help="Use /bin/sh for --shell (switches a --bash task back).")
@click.option(
    "--argv", "argv", is_flag=True,
    help="Run the words after the options directly: --argv /bin/echo hi (options go first; "
         "write -- before the program to pass words that look like ql options).",
)
@click.option("--script", metavar="PATH",
              help="Run the project's script PATH (`ql script put`), with the words after the "
                   "options as its arguments; the task pins the script's current content.")
@click.option("--interpreter", type=click.Choice(["python3", "node", "bash", "sh"]),
              help="What runs --script (default: by its extension: .py python3, .js/.mjs/.cjs "
                   "node, .sh bash).")
@click.option("--env", "env", multiple=True, metavar="NAME=VALUE",
              help="Set a plain environment entry (ql export writes its value); others are "
                   "kept (repeatable).")
@click.option("--secret-env", "secret_env", multiple=True, metavar="NAME=VAR",
              help="Set a secret environment entry NAME to the value of this command's "
                   "environment variable VAR (ql export never writes it; repeatable).")
@click.option("--unset-env", "unset_env", multiple=True, metavar="NAME",
              help="Remove an environment entry (repeatable).")
@click.option("--clear-env", is_flag=True, help="Start from no environment entries.")
@click.option("--cwd", metavar="DIR", help="Absolute working directory.")
@click.option("--no-cwd", is_flag=True, help="Run in the executor's own directory again.")
@click.option("--timeout", type=DURATION, metavar="DURATION",
              help=f"Kill the run's whole process group after this long, e.g. 30s, 5m, 1h30m "
                   f"(new tasks: {DEFAULT_TIMEOUT_MS // 60_000}m).")
@click.option("--max-attempts", type=click.IntRange(1, MAX_ATTEMPTS), metavar="N",
              help="Run a failing Run up to N times in all (new tasks: 1, no retry).")
@click.option("--retry-backoff", type=DURATION, metavar="DURATION",
              help="Wait before the first retry; it doubles with each attempt, times a random "
                   f"0.8-1.2 (new tasks: {DEFAULT_BACKOFF_MS // 1000}s).")
@click.option("--retry-max-backoff", type=DURATION, metavar="DURATION",
              help=f"Longest wait between attempts (new tasks: {DEFAULT_MAX_BACKOFF_MS // 60_000}m).")
@click.option("--retry-on-exit", metavar="CODES",
              help="Retry only these exit codes, e.g. 1,75 ('any': every failure, the default).")
@click.option("--retry-on-timeout/--no-retry-on-timeout", default=None,
              help="Whether a timed-out attempt is retried (new tasks: no).")
@click.option("--idempotent/--not-idempotent", default=None,
              help="Whether running the command twice is harmless: only then is an attempt "
                   "lost with its worker retried (new tasks: not idempotent).")
@click.option("--concurrency", type=click.IntRange(1, MAX_CONCURRENCY), metavar="N",
              help="At most N Runs of this task execute at once; the others wait queued.")
@click.option("--no-concurrency", is_flag=True, help="Remove the task's concurrency limit.")
@click.option("--requires", "requires", multiple=True, metavar="KEY[=VALUE]",
              help="Only a worker with this label (and value) runs the task, e.g. --requires "
                   "region=eu --requires gpu; replaces the task's requirements (repeatable). "
                   "See `ql worker --labels`.")
@click.option("--no-requires", is_flag=True, help="Let any worker run the task again.")
@click.option("--param", "params", multiple=True, metavar="NAME[:TYPE]=DEFAULT",
              help="A parameter a run now may give a value for: region=eu (text), count:int=3, "
                   "dry_run:bool=false; the command gets it as the variable NAME (and argv "
                   "tasks as {{NAME}} in their arguments). Replaces the task's parameters "
                   "(repeatable; docs/controls/parameters.md).")
@click.option("--no-params", is_flag=True, help="Remove every parameter.")
@click.option("--memory-limit", metavar="SIZE",
              help="Most memory a Run's command may use, e.g. 512M, 2G: resident memory in "
                   "a cgroup of its own where the worker may make one (killed beyond it: "
                   "MEMORY_LIMIT), else address space with setrlimit (an allocation beyond "
                   "it fails); docs/controls/limits.md.")
@click.option("--no-memory-limit", is_flag=True, help="Remove the memory limit.")
@click.option("--cpu-limit", type=DURATION, metavar="DURATION",
              help="Most CPU time a Run's command may use, whole seconds (30s, 10m): at the "
                   "limit it is stopped and its Attempt ends CPU_LIMIT.")
@click.option("--no-cpu-limit", is_flag=True, help="Remove the CPU-time limit.")
@click.option("--name", help="Display name (new tasks: the task id).")
@click.option("--disabled", is_flag=True, help="Publish the revision disabled (its triggers stop).")
@click.option(
    "--no-repin", is_flag=True,
    help="Leave triggers pinned to the old revision (they stop firing until republished).",
)
@click.argument("words", nargs=-1, metavar="[PROGRAM ARGS...]")
@database_url_option
@json_option
def publish(
    project: str, task_id: str, shell: str | None, bash: bool, sh: bool, argv: bool,
    script: str | None, interpreter: str | None, env: tuple[str, ...], secret_env: tuple[str, ...],
    unset_env: tuple[str, ...], clear_env: bool, cwd: str | None, no_cwd: bool,
    timeout: int | None, max_attempts: int | None, retry_backoff: int | None,
    retry_max_backoff: int | None, retry_on_exit: str | None, retry_on_timeout: bool | None,
    idempotent: bool | None, concurrency: int | None, no_concurrency: bool,
    requires: tuple[str, ...], no_requires: bool, params: tuple[str, ...], no_params: bool,
    memory_limit: str | None,
    no_memory_limit: bool, cpu_limit: int | None, no_cpu_limit: bool, name: str | None, disabled: bool, no_repin: bool,
    words: tuple[str, ...], database_url: str, as_json: bool,
) -> None:
    """Publish a new revision of a task (a no-op when nothing changed).

    For an existing task, what you leave out keeps its current value: `--timeout 10s` alone
    changes only the timeout, and `--env` adds or replaces entries without dropping the
    others. An --env value is plain: `ql export` writes it; a --secret-env value is a secret
    (read from an environment variable here, never written out by anything). A new task needs
    --shell, --argv or --script. Triggers bound to the task are re-pinned to
    the new revision in the same transaction, unless --no-repin is given or the revision is
    disabled. Publishing a deleted task restores it, enabled unless --disabled is given.
    """
    patch = TaskPatch(
        command=_command(shell, bash, sh, argv, script, interpreter, words),
        env_set=environment_from_pairs(env) + secret_entries(secret_env),
        env_unset=unset_env,
        env_clear=clear_env,
        working_directory=cwd,
        clear_working_directory=no_cwd,
        timeout_ms=timeout,
        retry=retry_changes(max_attempts, retry_backoff, retry_max_backoff, retry_on_exit,
                             retry_on_timeout),
        idempotent=idempotent,
        concurrency=concurrency,
        clear_concurrency=no_concurrency,
        requires=requirements_change(requires, no_requires, "--requires"),
        parameters=parameters_change(params, no_params),
        memory_limit_bytes=None if memory_limit is None else parse_size(memory_limit,
                                                                        "--memory-limit"),
        clear_memory_limit=no_memory_limit,
        cpu_limit_s=None if cpu_limit is None else whole_seconds(cpu_limit, "--cpu-limit"),
        clear_cpu_limit=no_cpu_limit,
    )
    if concurrency is not None and no_concurrency:
        raise InvalidInput("concurrency", "give either --concurrency N or --no-concurrency")
    _check_cwd_here(cwd, database_url)
    with catalog(database_url) as cat:
        result = cat.task_publish(TaskPublishRequest(
            project_id=project, task_id=task_id, patch=patch, name=name,
            enabled=False if disabled else None, repin_triggers=not no_repin,
            keep_shell=not (bash or sh),
        ))
    if as_json:
        emit_json(result)
        return
    if result.created:
        say(f"published task {project}/{task_id} revision {result.revision} "
            f"(digest {result.content_digest[:12]})"
            + (" (restored)" if result.restored else ""))
    elif result.restored:
        say(f"restored task {project}/{task_id} at revision {result.revision}")
    else:
        say(f"task {project}/{task_id} unchanged at revision {result.revision}")
    repinned = result.repinned_triggers
    if repinned:
        say("re-pinned triggers: " + ", ".join(repinned))
    if cwd is not None and not commands_run_here(database_url):
        warn(f"note: {cwd!r} must exist on every worker host that runs this task")


@task.command("list")
@project_option
@click.option("--all", "include_deleted", is_flag=True, help="Include deleted tasks.")
@click.option("--label", metavar="LABEL", help="Only the tasks with this label.")
@database_url_option
@json_option
def list_tasks(project: str, include_deleted: bool, label: str | None, database_url: str,
               as_json: bool) -> None:
    """List the current revision of every task in a project (environment values are never
    shown, only their names)."""
    respond(catalog(database_url), lambda cat: cat.task_list(project, include_deleted, label),
            as_json, _task_table)


def _task_table(items: list[TaskView]) -> None:
    emit_table(
        [(item.task, item.revision,
          "deleted" if item.deleted else ("yes" if item.enabled else "no"),
          command_text(item.command), timeout_text(item.timeout_ms),
          ",".join(item.environment) or "-")
         for item in items],
        ["TASK", "REV", "ENABLED", "COMMAND", "TIMEOUT", "ENV"],
    )


@task.command()
@project_option
@task_option
@database_url_option
@json_option
def show(project: str, task_id: str, database_url: str, as_json: bool) -> None:
    """Show a task: its current revision and every earlier one, with what each changed."""
    respond(catalog(database_url), lambda cat: cat.task_show(project, task_id), as_json,
            lambda view: _say_task(project, task_id, view))


def _say_task(project: str, task_id: str, view: TaskShowView) -> None:
    state = "deleted" if view.deleted else ("enabled" if view.enabled else "disabled")
    say(f"task       {project}/{task_id} ({view.name}), {state}")
    say(f"revision   {view.revision} published {when(view.published_at_ms)}")
    say(f"command    {command_text(view.command)}")
    say(f"cwd        {cwd_text(view.working_directory)}")
    say(f"timeout    {timeout_text(view.timeout_ms)}")
    say(f"env        {', '.join(view.environment) or '-'}")
    say(f"retry      {retry_text(view.retry)}")
    say(f"idempotent {'yes' if view.idempotent else 'no'}")
    say(f"limit      {limit_text(view.concurrency)}")
    say(f"requires   {requires_text(view.requires)}")
    say(f"parameters {parameters_text([p.to_json() for p in view.parameters])}")
    say(f"memory     {memory_text(view.memory_limit_bytes)}")
    say(f"cpu        {cpu_text(view.cpu_limit_s)}")
    say(f"digest     {view.content_digest}")
    say("history:")
    for entry in view.history:
        changes = entry.changes
        text = "; ".join(change_text(c) for c in changes) if changes else "first revision"
        say(f"  {entry.revision:>3}  {when(entry.published_at_ms)}  {text}")


@task.command()
@project_option
@task_option
@click.option("--from", "old", type=click.IntRange(1), help="Earlier revision (default: the one "
                                                            "before --to).")
@click.option("--to", "new", type=click.IntRange(1), help="Later revision (default: the current).")
@database_url_option
@json_option
def diff(project: str, task_id: str, old: int | None, new: int | None, database_url: str,
         as_json: bool) -> None:
    """What changed between two revisions of a task (environment values stay hidden)."""
    respond(catalog(database_url), lambda cat: cat.task_diff(project, task_id, old, new),
            as_json, lambda view: _say_diff(project, task_id, view))


def _say_diff(project: str, task_id: str, view: TaskDiffView) -> None:
    say(f"task {project}/{task_id}: revision {view.from_} -> {view.to}")
    changes = view.changes
    for change in changes:
        say("  " + change_text(change))
    if not changes:
        say("  (no changes)")


def _switch(project: str, task_id: str, enabled: bool, database_url: str, as_json: bool) -> None:
    def text(result: TaskPublishView) -> None:
        if result.created:
            say(f"{'enabled' if enabled else 'disabled'} task {project}/{task_id} "
                f"(revision {result.revision})")
        else:
            say(f"task {project}/{task_id} already {'enabled' if enabled else 'disabled'}")

    respond(catalog(database_url),
            lambda cat: cat.task_set_enabled(project, task_id, enabled), as_json, text)


add_switch_commands(
    task, "task", _switch,
    enable_help="Enable a task again (its triggers are re-pinned; the enabled ones fire again).",
    disable_help="Disable a task: publishes a disabled revision; its triggers stop.")


add_delete_command(
    task, "task",
    "Delete a task: it stops and disappears from lists (refused while triggers use it).\n\n"
    "Its revisions stay, for the Runs and the audit that refer to them; publishing the task "
    "again restores it.")
