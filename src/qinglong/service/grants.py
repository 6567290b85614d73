"""Per-project roles as the surfaces manage them (``ql user grant``, the API's
/projects/{project}/grants) and what a caller may do (``GET /api/v1/me``); the decisions
themselves are ``service.access``'s."""

from __future__ import annotations

from qinglong.domain.identifiers import project_id
from qinglong.errors import NotFound
from qinglong.service.access import global_level, levels
from qinglong.service.accounts import (
    LEVEL_SCOPE,
    Level,
    Principal,
    check_grant_role,
    check_username,
)
from qinglong.service.views.accounts import GrantView, MeView
from qinglong.service.views.base import instant
from qinglong.storage.accounts import AccountStore
from qinglong.storage.accounts.params import Grant


def grant_view(grant: Grant) -> GrantView:
    return GrantView(username=grant.username, project=grant.project_id, role=grant.role,
                     granted_by=grant.granted_by, granted_at=instant(grant.granted_at_ms))


def me_view(principal: Principal, second_factor_on: bool | None) -> MeView:
    """What ``principal`` may do; ``second_factor_on``: whether its user's second factor is
    on (None for a token or the CLI)."""
    return MeView(username=principal.username, role=principal.role, via=principal.via,
                  session_method=principal.session_method, second_factor_on=second_factor_on,
                  token_id=principal.token_id, token_scope=principal.scope,
                  token_projects=None if principal.projects is None
                  else list(principal.projects),
                  everywhere=LEVEL_SCOPE[Level(global_level(principal))],
                  projects={name: LEVEL_SCOPE[Level(level)]
                            for name, level in levels(principal).items()})


class Grants:
    def __init__(self, store: AccountStore) -> None:
        self._store = store

    def on_project(self, project: str) -> list[GrantView]:
        return [grant_view(g) for g in self._store.grants_on(project_id(project))]

    def put(self, username: str, project: str, role: str, by: str) -> GrantView:
        """Give ``username`` ``role`` on ``project`` (replacing the role held there)."""
        return grant_view(self._store.grant_put(check_username(username), project_id(project),
                                                check_grant_role(role), by))

    def remove(self, username: str, project: str) -> None:
        if not self._store.grant_delete(check_username(username), project_id(project)):
            raise NotFound("grant", f"{username} on {project}")
