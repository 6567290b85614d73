"""`ql task label` and `ql trigger label`: show, set or clear the labels of a task or trigger
(organising tags such as team:payments or nightly; docs/api.md "Labels, pins and saved
filters"). They are not part of a revision: setting them publishes nothing. The change is in
the audit log as the API's is (task.label, trigger.label).

Attached to the `task` and `trigger` groups when this module is imported (cli/main.py does).
"""

from __future__ import annotations

from typing import Literal

import click

from qinglong.cli.commands.task import task, task_option
from qinglong.cli.commands.trigger import trigger, trigger_option
from qinglong.cli.commands.user import cli_principal
from qinglong.cli.context import services
from qinglong.cli.output import emit_json, say
from qinglong.cli.params import database_url_option, json_option, project_option
from qinglong.errors import InvalidInput
from qinglong.service.views.organise import LabelsView

Kind = Literal["task", "trigger"]


def _labels(kind: Kind, project: str, entity: str, wanted: tuple[str, ...], clear: bool,
            database_url: str, as_json: bool) -> None:
    if clear and wanted:
        raise InvalidInput("--clear", "give --set LABEL or --clear, not both")
    with services(database_url) as opened:
        if not wanted and not clear:
            found = opened.labels.of(kind, project, entity).get((project, entity), ())
            if kind == "task":
                opened.catalog.task_show(project, entity)  # NotFound for an unknown task
            elif not opened.catalog.trigger_list(project, trigger_id=entity):
                raise InvalidInput("--trigger", f"no trigger {entity} in {project}")
            view = LabelsView(project=project, kind=kind, id=entity, labels=list(found))
        else:
            with opened.transaction(f"set {kind} labels"):
                view = opened.labels.put(kind, project, entity, list(wanted))
                opened.accounts.audit(cli_principal(), f"{kind}.label", project=project,
                                      target=f"{kind} {entity}", detail={"labels": view.labels})
    if as_json:
        emit_json(view)
    else:
        say(f"{kind} {project}/{entity}: " + (" ".join(view.labels) or "no labels"))


_SET = click.option("--set", "wanted", multiple=True, metavar="LABEL",
                    help="A label of the new set (repeatable; replaces every label).")
_CLEAR = click.option("--clear", is_flag=True, help="Remove every label.")


@task.command("label")
@project_option
@task_option
@_SET
@_CLEAR
@database_url_option
@json_option
def label_task(project: str, task_id: str, wanted: tuple[str, ...], clear: bool,
               database_url: str, as_json: bool) -> None:
    """Show a task's labels, or set (--set, repeatable) or clear (--clear) them: 1-48
    lowercase letters, digits, '.', '_', ':', '/' and '-' each, at most 16."""
    _labels("task", project, task_id, wanted, clear, database_url, as_json)


@trigger.command("label")
@project_option
@trigger_option
@_SET
@_CLEAR
@database_url_option
@json_option
def label_trigger(project: str, trigger_id: str, wanted: tuple[str, ...], clear: bool,
                  database_url: str, as_json: bool) -> None:
    """Show a trigger's labels, or set (--set, repeatable) or clear (--clear) them."""
    _labels("trigger", project, trigger_id, wanted, clear, database_url, as_json)
