"""The commands `ql task` and `ql trigger` both have, over one task or one trigger: enable,
disable and delete. They take the same options (--project, --task or --trigger,
--database-url, --json); each group gives only what the command does to its kind."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import click

from qinglong.cli.context import catalog, respond
from qinglong.cli.output import say
from qinglong.cli.params import database_url_option, json_option, project_option
from qinglong.service.catalog import Catalog
from qinglong.service.views.base import ViewModel

Kind = Literal["task", "trigger"]
Switch = Callable[[str, str, bool, str, bool], None]  # project, target, enabled, url, --json


def _target_options(kind: Kind) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        func = json_option(func)
        func = database_url_option(func)
        func = click.option(f"--{kind}", "target_id", required=True, metavar=kind.upper(),
                            help=f"{kind.capitalize()} id.")(func)
        return project_option(func)

    return decorate


def add_switch_commands(group: click.Group, kind: Kind, switch: Switch, *, enable_help: str,
                        disable_help: str) -> None:
    """`enable` and `disable` in ``group``: they call ``switch`` with the state asked for."""
    def command(enabled: bool) -> Callable[..., None]:
        @_target_options(kind)
        def switched(project: str, target_id: str, database_url: str, as_json: bool) -> None:
            switch(project, target_id, enabled, database_url, as_json)

        return switched

    group.command("enable", help=enable_help)(command(True))
    group.command("disable", help=disable_help)(command(False))


def add_delete_command(group: click.Group, kind: Kind, help_text: str) -> None:
    """`delete` in ``group``: the catalog deletes the task or trigger; its view is printed."""
    @_target_options(kind)
    def delete(project: str, target_id: str, database_url: str, as_json: bool) -> None:
        def call(cat: Catalog) -> ViewModel:
            if kind == "task":
                return cat.task_delete(project, target_id)
            return cat.trigger_delete(project, target_id)

        respond(catalog(database_url), call, as_json,
                lambda view: say(f"deleted {kind} {project}/{target_id}"))

    group.command("delete", help=help_text)(delete)
