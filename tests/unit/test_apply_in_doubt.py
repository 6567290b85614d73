"""`ql apply` over a unit of work whose COMMIT reply is lost: the project's fate is in doubt,
and the report says so instead of claiming a rollback (the service's ApplyStopped, then the
CLI's words, which tests/e2e/test_apply.py checks for a plain refusal)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import pytest

from qinglong.errors import InvalidInput, OutcomeUnknown
from qinglong.service.declarative import Declarative
from qinglong.service.definition_plan import PHASE_PROJECT, Action, ApplyStopped, Change, Plan
from qinglong.storage.definitions import DefinitionStore
from qinglong.storage.definitions.params import ProjectCreateParams

T = TypeVar("T")


class Store:
    def __init__(self) -> None:
        self.created: list[str] = []

    def project_create(self, params: ProjectCreateParams) -> None:
        self.created.append(params.project_id)


def _plan(*projects: str) -> Plan:
    return Plan([Change(kind="project", project_id=p, item_id=p, action=Action.CREATE,
                        phase=PHASE_PROJECT, params=ProjectCreateParams(project_id=p))
                 for p in projects])


def _unit(fail_on: str, error: Exception) -> Callable[[str, Callable[[], Any]], Any]:
    def unit(action: str, work: Callable[[], T]) -> T:
        result = work()  # the writes ran; then the COMMIT of ``fail_on``'s unit goes wrong
        if action.endswith(fail_on):
            raise error
        return result
    return unit


@pytest.mark.parametrize(("error", "in_doubt"), [
    (OutcomeUnknown("the reply to COMMIT was lost"), True),
    (InvalidInput("project", "was changed meanwhile"), False)])
def test_a_lost_commit_reply_leaves_the_project_in_doubt(error: Exception,
                                                          in_doubt: bool) -> None:
    store = Store()
    declarative = Declarative(cast(DefinitionStore, store), _unit("beta", error))
    plan = _plan("alpha", "beta")
    with pytest.raises(ApplyStopped) as stopped:
        declarative.apply(plan)
    assert stopped.value.in_doubt is in_doubt
    assert stopped.value.change.project_id == "beta"
    assert [c.project_id for c in stopped.value.written] == ["alpha"]
    assert [c.project_id for c in stopped.value.not_written] == ["beta"]
    assert store.created == ["alpha", "beta"]  # beta's write ran inside its unit
