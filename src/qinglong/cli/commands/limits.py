"""`ql limits`: the cap on Runs executing at once across every executor."""

from __future__ import annotations

import click

from qinglong.cli.context import services
from qinglong.cli.output import emit_json, say
from qinglong.cli.params import database_url_option, json_option
from qinglong.domain.task import MAX_CONCURRENCY
from qinglong.service.views.system import LimitsView


@click.group()
def limits() -> None:
    """Concurrency limits. Each worker runs at most --slots Runs, each task at most its
    --concurrency, and the whole cluster (or `ql serve`) at most the global limit set here.
    Limits are judged from the Runs in progress, so a lost worker frees its places when the
    reconciler ends its Runs: there is no counter to leak."""


@limits.command()
@database_url_option
@json_option
def show(database_url: str, as_json: bool) -> None:
    """Show the global limit."""
    with services(database_url) as opened:
        view = opened.catalog.limits()
    _show(view, as_json)


@limits.command("set")
@click.option("--global", "global_limit", type=click.IntRange(1, MAX_CONCURRENCY), metavar="N",
              help=f"At most N Runs executing at once, everywhere (1..{MAX_CONCURRENCY}).")
@click.option("--no-global", is_flag=True, help="Remove the global limit.")
@database_url_option
@json_option
def set_limits(global_limit: int | None, no_global: bool, database_url: str,
               as_json: bool) -> None:
    """Set (--global N) or remove (--no-global) the global limit. Runs already executing
    are not stopped; new ones wait in the queue while the limit is reached."""
    if (global_limit is None) == (not no_global):
        raise click.UsageError("give exactly one of --global N and --no-global")
    with services(database_url) as opened:
        opened.catalog.global_limit_set(None if no_global else global_limit)
        view = opened.catalog.limits()
    _show(view, as_json)


def _show(view: LimitsView, as_json: bool) -> None:
    if as_json:
        emit_json(view)
        return
    say(f"global  {view.global_ if view.global_ is not None else 'none (no cap)'}")
