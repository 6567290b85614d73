"""The views of declarative definitions: a plan of `ql apply` / `ql import crontab` (what
would change, or what was written), one change per project, task or trigger, field by field."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from qinglong.service.definition_plan import Action, Change, Plan
from qinglong.service.views.base import ViewModel, one_of


class FieldChangeView(ViewModel):
    field: str
    from_: Any = Field(serialization_alias="from", description="The stored value (null: none)")
    to: Any = Field(description="The value the files state (null: none)")


class ChangeView(ViewModel):
    kind: Annotated[str, one_of("project", "task", "trigger")]
    project: str
    id: str
    action: Annotated[str, one_of(*(action.value for action in Action))]
    pruned: bool = Field(description="Disabled by --prune: the files no longer name it")
    source: str | None = Field(description="file:line the change comes from")
    fields: list[FieldChangeView]
    revision: int | None = Field(description="The stored revision (plan) or the one written")
    repinned_triggers: list[str]
    written: bool


class PlanView(ViewModel):
    dry_run: bool
    prune: bool
    counts: dict[str, int] = Field(description="How many changes of each action")
    changes: list[ChangeView]
    notes: list[str] | None = Field(default=None,
                                    description="What an import decided (ql import only)")


def change_view(change: Change) -> ChangeView:
    return ChangeView(
        kind=change.kind, project=change.project_id, id=change.item_id,
        action=change.action.value, pruned=change.pruned,
        source=str(change.where) if change.where else None,
        fields=[FieldChangeView(field=c.field, from_=c.before, to=c.after)
                for c in change.fields],
        revision=change.revision, repinned_triggers=list(change.repinned),
        written=change.written)


def plan_view(plan: Plan, *, dry_run: bool, prune: bool,
              notes: Sequence[str] | None = None) -> PlanView:
    """The plan as `--json` prints it: every change but an unchanged project."""
    more = {} if notes is None else {"notes": list(notes)}
    return PlanView(dry_run=dry_run, prune=prune, counts=plan.counts(),
                    changes=[change_view(c) for c in plan.changes
                             if c.kind != "project" or c.action is not Action.UNCHANGED],
                    **more)
