"""`ql`: the qinglong command. Errors print one line and map to stable exit codes.

Exit codes: 0 ok; 1 failure (storage, internal); 2 bad input (usage, invalid value,
unknown or conflicting record) -- nothing was written; 3 not ready (schema or
database state); 4 already running; 5 `ql audit` found violations; 130 interrupted.
"""

from __future__ import annotations

import sys

import click

from qinglong import __version__
from qinglong.cli.commands.audit import audit
from qinglong.cli.commands.control import control
from qinglong.cli.commands.db import db
from qinglong.cli.commands.project import project
from qinglong.cli.commands.run import run
from qinglong.cli.commands.serve import serve
from qinglong.cli.commands.task import task
from qinglong.cli.commands.trigger import trigger
from qinglong.errors import (
    AlreadyRunning,
    Conflict,
    InvalidInput,
    NotFound,
    NotReady,
    PermissionDenied,
    QinglongError,
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_READY = 3
EXIT_ALREADY_RUNNING = 4
EXIT_INTERRUPTED = 130

EXIT_CODES: tuple[tuple[type[QinglongError], int], ...] = (
    (InvalidInput, EXIT_BAD_INPUT),
    (NotFound, EXIT_BAD_INPUT),
    (Conflict, EXIT_BAD_INPUT),
    (PermissionDenied, EXIT_BAD_INPUT),
    (NotReady, EXIT_NOT_READY),
    (AlreadyRunning, EXIT_ALREADY_RUNNING),
    (QinglongError, EXIT_FAILURE),
)


def exit_code_for(exc: QinglongError) -> int:
    for kind, code in EXIT_CODES:
        if isinstance(exc, kind):
            return code
    return EXIT_FAILURE  # pragma: no cover - QinglongError is the last row


@click.group(
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


cli.add_command(db)
cli.add_command(project)
cli.add_command(task)
cli.add_command(trigger)
cli.add_command(run)
cli.add_command(serve)
cli.add_command(control)
cli.add_command(audit)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main(argv: list[str] | None = None) -> None:
    code = EXIT_OK
    try:
        result = cli.main(args=argv, prog_name="ql", standalone_mode=False)
        if isinstance(result, int):
            code = result
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        code = EXIT_OK
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "ql"
        click.echo(f"{where}: {_one_line(exc.format_message())} (see {where} --help)", err=True)
        code = EXIT_BAD_INPUT
    except click.ClickException as exc:
        click.echo(f"ql: {_one_line(exc.format_message())}", err=True)
        code = EXIT_BAD_INPUT
    except click.exceptions.Abort:
        code = EXIT_INTERRUPTED
    except QinglongError as exc:
        click.echo(f"ql: {_one_line(exc.message)}", err=True)
        code = exit_code_for(exc)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        code = EXIT_OK
    sys.exit(code)
