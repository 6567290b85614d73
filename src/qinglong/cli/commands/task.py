"""`ql task`: publish and list tasks (what to run)."""

from __future__ import annotations

import click

from qinglong.cli.context import backend
from qinglong.cli.output import emit_json, emit_table, rfc3339, say
from qinglong.cli.params import DURATION, database_url_option, json_option, project_option
from qinglong.domain.task import (
    DEFAULT_TIMEOUT_MS,
    ArgvCommand,
    CommandSpec,
    ShellCommand,
    TaskRevision,
    environment_from_pairs,
)
from qinglong.errors import InvalidInput
from qinglong.storage.ports import TaskPublishParams


@click.group()
def task() -> None:
    """Tasks say what to run: a command with its environment, directory and timeout."""


def task_json(revision: TaskRevision) -> dict[str, object]:
    return {
        "project": revision.project_id,
        "task": revision.task_id,
        "revision": revision.revision,
        "name": revision.name,
        "enabled": revision.enabled,
        "spec": revision.spec.envelope(),
        "content_digest": revision.content_digest,
        "published_at": rfc3339(revision.created_at_ms),
    }


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


def _command(shell: str | None, bash: bool, argv: bool, words: tuple[str, ...]) -> ArgvCommand | ShellCommand:
    if argv and shell is not None:
        raise InvalidInput("command", "give either --shell or --argv, not both")
    if shell is not None:
        if words:
            raise InvalidInput("command", f"unexpected argument {words[0]!r} after --shell")
        return ShellCommand(command=shell, shell="/bin/bash" if bash else "/bin/sh")
    if not argv:
        raise InvalidInput("command", "give --shell 'COMMAND' or --argv /absolute/program [ARGS...]")
    if bash:
        raise InvalidInput("bash", "--bash only applies to --shell")
    if not words:
        raise InvalidInput("argv", "needs an absolute program path, e.g. --argv /bin/echo hi")
    misplaced = _misplaced_option(words)
    if misplaced is not None:
        raise InvalidInput("argv", f"{misplaced!r} after the program is an option of this command: "
                                   "put options before the program, or write -- before the program "
                                   "to pass it to the program as an argument")
    return ArgvCommand(file=words[0], args=tuple(words[1:]))


@task.command(cls=_PublishCommand, context_settings={"allow_interspersed_args": False})
@project_option
@click.option("--task", "task_id", required=True, metavar="TASK", help="Task id.")
@click.option("--shell", metavar="COMMAND", help="Run COMMAND with /bin/sh -c (or --bash).")
@click.option("--bash", is_flag=True, help="Use /bin/bash instead of /bin/sh for --shell.")
@click.option(
    "--argv", "argv", is_flag=True,
    help="Run the words after the options directly: --argv /bin/echo hi (options go first; "
         "write -- before the program to pass words that look like ql options).",
)
@click.option("--env", "env", multiple=True, metavar="NAME=VALUE", help="Environment entry (repeatable).")
@click.option("--cwd", metavar="DIR", help="Absolute working directory (default: where ql serve runs).")
@click.option(
    "--timeout", type=DURATION, default=f"{DEFAULT_TIMEOUT_MS // 1000}s", show_default=True,
    help="Kill the run's whole process group after this long (e.g. 30s, 5m).",
)
@click.option("--name", help="Display name (defaults to the task id).")
@click.option("--disabled", is_flag=True, help="Publish a disabled revision (its triggers stop).")
@click.option(
    "--no-repin", is_flag=True,
    help="Leave triggers pinned to the old revision (they stop firing until republished).",
)
@click.argument("words", nargs=-1, metavar="[PROGRAM ARGS...]")
@database_url_option
@json_option
def publish(
    project: str,
    task_id: str,
    shell: str | None,
    bash: bool,
    argv: bool,
    env: tuple[str, ...],
    cwd: str | None,
    timeout: int,
    name: str | None,
    disabled: bool,
    no_repin: bool,
    words: tuple[str, ...],
    database_url: str,
    as_json: bool,
) -> None:
    """Publish a new revision of a task (a no-op when nothing changed).

    Triggers bound to the task are re-pinned to the new revision in the same
    transaction, unless --no-repin is given or the new revision is disabled.
    """
    spec = CommandSpec(
        command=_command(shell, bash, argv, words),
        environment=environment_from_pairs(env),
        working_directory=cwd,
        timeout_ms=timeout,
    )
    with backend(database_url) as store:
        result = store.definitions.task_publish(
            TaskPublishParams(
                project_id=project,
                task_id=task_id,
                name=task_id if name is None else name,
                spec=spec,
                enabled=not disabled,
                repin_triggers=not no_repin,
            )
        )
    revision = result.revision
    if as_json:
        emit_json({**task_json(revision), "created": result.created,
                   "repinned_triggers": list(result.repinned_triggers)})
        return
    if result.created:
        say(f"published task {project}/{task_id} revision {revision.revision} "
            f"(digest {revision.content_digest[:12]})")
    else:
        say(f"task {project}/{task_id} unchanged at revision {revision.revision}")
    if result.repinned_triggers:
        say("re-pinned triggers: " + ", ".join(result.repinned_triggers))


@task.command("list")
@project_option
@database_url_option
@json_option
def list_tasks(project: str, database_url: str, as_json: bool) -> None:
    """List the current revision of every task in a project."""
    with backend(database_url) as store:
        items = store.definitions.task_list(project)
    if as_json:
        emit_json([task_json(item) for item in items])
        return
    emit_table(
        [
            (
                item.task_id,
                item.revision,
                "yes" if item.enabled else "no",
                " ".join(item.spec.command.argv()),
                f"{item.spec.timeout_ms // 1000}s",
            )
            for item in items
        ],
        ["TASK", "REV", "ENABLED", "COMMAND", "TIMEOUT"],
    )
