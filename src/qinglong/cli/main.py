"""`ql`: the qinglong command. Errors print one line and map to stable exit codes.

Exit codes: 0 ok; 1 failure (storage, internal); 2 bad input (usage, invalid value,
unknown or conflicting record) -- nothing was written; 3 not ready (schema or
database state); 4 already running; 5 `ql audit` found violations; 130 interrupted.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Mapping, Sequence

import click

from qinglong import __version__
from qinglong.cli.output import shown
from qinglong.domain.text import has_lone_surrogate
from qinglong.errors import InvalidInput, QinglongError
from qinglong.service.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    exit_code_for,
    problem,
)

# Domain field names as the options that set them (an error names what the user typed).
FIELD_OPTIONS = {
    "command.command": "--shell",
    "command.shell": "--bash",
    "command.file": "--argv",
    "command.path": "--script",
    "command.interpreter": "--interpreter",
    "script": "--script",
    "command.args": "--argv",
    "command": "--shell/--argv",
    "argv": "--argv",
    "environment": "--env",
    "env": "--env",
    "working-directory": "--cwd",
    "timeout": "--timeout",
    "name": "--name",
    "cron": "--cron",
    "timezone": "--timezone",
    "misfire": "--misfire",
    "bash": "--bash",
    "sh": "--sh",
    "max-attempts": "--max-attempts",
    "retry-backoff": "--retry-backoff",
    "retry-max-backoff": "--retry-max-backoff",
    "retry-on-exit": "--retry-on-exit",
    "concurrency": "--concurrency",
    "requires": "--requires",
    "memory-limit": "--memory-limit",
    "cpu-limit": "--cpu-limit",
    "run-as": "--run-as",
    "nice": "--nice",
    "overlap": "--overlap",
    "overlap-queue-limit": "--overlap-queue-limit",
    "project": "--project",
    "task": "--task",
    "trigger": "--trigger",
    "status": "--status",
    "since": "--since",
    "limit": "--limit",
    "after": "--after",
    "from": "--from",
    "to": "--to",
    "grace": "--grace",
    "budget": "--budget",
    "interval": "--interval",
    "database-url": "--database-url",
    "log-dir": "--log-dir",
    "drain-timeout": "--drain-timeout",
    "variable": "NAME",  # ql env
    "value": "--value",
    "value-file": "--value-file",
    "from-env": "--from-env",
    "description": "--description",
    "old-key-file": "--old-key-file",
    "new-key-file": "--new-key-file",
}


def option_for(field: str) -> str:
    """``command.args[3]`` -> ``--argv``; ``environment.TOKEN`` -> ``--env``; unknown stays."""
    base = field.split("[", 1)[0]
    while base:
        if base in FIELD_OPTIONS:
            return FIELD_OPTIONS[base]
        base = base.rpartition(".")[0]
    return field


# Each command by name: (its module in qinglong.cli.commands, the attribute, and the modules
# that add subcommands to it). A command's module is imported when it runs (or for --help),
# so `ql worker` loads neither the panel nor the account services.
COMMANDS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "apply": ("apply", "apply", ()),
    "audit": ("audit", "audit", ()),
    "control": ("control", "control", ()),
    "db": ("db", "db", ()),
    "deps": ("deps", "deps", ()),
    "env": ("env", "env", ()),
    "export": ("apply", "export", ()),
    "flow": ("flow", "flow", ()),
    "import": ("apply", "import_group", ()),
    "limits": ("limits", "limits", ()),
    "notify": ("notify", "notify", ("notify_rules",)),  # ql notify rule
    "project": ("project", "project", ()),
    "repo": ("repo", "repo", ()),
    "run": ("run", "run", ()),
    "secret": ("env", "secret", ()),
    "script": ("script", "script", ()),
    "serve": ("serve", "serve", ()),
    "task": ("task", "task", ("manual", "labels")),  # ql task run, ql task label
    "token": ("token", "token", ()),
    "trigger": ("trigger", "trigger", ("backfill", "ledger", "manual", "labels")),
    "user": ("user", "user", ("user_grants",)),  # ql user grant
    "web": ("web", "web", ()),
    "worker": ("worker", "worker", ()),
}


class LazyGroup(click.Group):
    """The `ql` group: a command's module is imported only when that command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module, attribute, extensions = entry
        for extension in extensions:
            importlib.import_module(f"qinglong.cli.commands.{extension}")
        command = getattr(importlib.import_module(f"qinglong.cli.commands.{module}"), attribute)
        assert isinstance(command, click.Command)
        return command


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="ql")
def cli() -> None:
    """qinglong: cron scheduling that admits every occurrence exactly once.

    \b
    Quick start (SQLite, the default database is ./qinglong.db):
      ql db migrate
      ql project create demo
      ql task publish --project demo --task hello --shell 'echo hi'
      ql trigger publish --project demo --trigger every-minute --task hello \\
         --cron '* * * * *' --timezone UTC
      ql serve
      ql run list --project demo
    """


def _one_line(text: str) -> str:
    return " ".join(text.split())


def report(exc: QinglongError, as_json: bool) -> int:
    """Print one line (or one JSON problem object) on stderr; the exit code for ``exc``."""
    field = option_for(exc.field) if isinstance(exc, InvalidInput) else None
    if as_json:
        click.echo(json.dumps({"error": problem(exc, field=field)}, sort_keys=True), err=True)
    elif isinstance(exc, InvalidInput):
        click.echo(shown(f"ql: {field}: {_one_line(exc.rule)}"), err=True)
    else:
        click.echo(shown(f"ql: {_one_line(exc.message)}"), err=True)
    return exit_code_for(exc)


def undecodable(args: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """Which argument (or QL_* environment variable) is not UTF-8 text: Python hands bytes
    it cannot decode over as lone surrogates, which nothing could store or print back."""
    for index, arg in enumerate(args, start=1):
        if has_lone_surrogate(arg):
            return f"argument {index} ({shown(arg)})"
    for name, value in sorted(environ.items()):
        if name.startswith("QL_") and has_lone_surrogate(value):
            return f"the environment variable {name}"
    return None


def _usage_problem(message: str, where: str) -> dict[str, object]:
    return {"type": "urn:qinglong:error:QL_USAGE", "title": "The command line is not valid",
            "status": 400, "code": "QL_USAGE", "detail": f"{where}: {message}"}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    as_json = "--json" in args[: args.index("--")] if "--" in args else "--json" in args
    code = EXIT_OK
    bad = undecodable(args, os.environ)
    if bad is not None:
        sys.exit(report(InvalidInput(bad, "is not valid UTF-8 text"), as_json))
    try:
        result = cli.main(args=args, prog_name="ql", standalone_mode=False)
        if isinstance(result, int):
            code = result
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        code = EXIT_OK
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "ql"
        message = _one_line(exc.format_message())
        if as_json:
            click.echo(json.dumps({"error": _usage_problem(message, where)}, sort_keys=True),
                       err=True)
        else:
            click.echo(shown(f"{where}: {message} (see {where} --help)"), err=True)
        code = EXIT_BAD_INPUT
    except click.ClickException as exc:
        message = _one_line(exc.format_message())
        if as_json:
            click.echo(json.dumps({"error": _usage_problem(message, "ql")}, sort_keys=True),
                       err=True)
        else:
            click.echo(shown(f"ql: {message}"), err=True)
        code = EXIT_BAD_INPUT
    except click.exceptions.Abort:
        code = EXIT_INTERRUPTED
    except QinglongError as exc:
        code = report(exc, as_json)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        code = EXIT_OK
    sys.exit(code)
