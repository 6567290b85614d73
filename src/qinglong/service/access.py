"""Who may do what, on which project (per-project roles; docs/security.md "Tenants").

A user holds a role on every project (``users.role``: viewer, operator or admin), or none
(``none``), and roles on single projects (grants). On a project the user has the higher of
the two. An API token narrows its user: its scope caps every level, and a token limited to
some projects reaches only those, and nothing outside a project (no users, no audit log, no
notification channels). Every route of the API states what it acts on (``Reach``), and the
surface asks here before its handler runs:

- ``GLOBAL``: the installation (users, the audit log, channels, the queue): the global level.
- ``PROJECT``: one project, named by the route: the level on that project. Refused with 403
  whether or not the project exists, so a stranger to a project learns nothing of it.
- ``RUN`` and ``FLOW_RUN``: a Run or a flow run, whose project is looked up first; one the
  caller may not read answers exactly as one that does not exist (404).
- ``LISTING``: a list across projects (``?project=`` narrows it): the level on the named
  project, or on at least one; the handler keeps only the projects ``visible`` returns.
- ``SELF``: the caller's own session, tokens and abilities, and what reads nothing of any
  project (a cron preview, the API's document, the cluster's health): anyone authenticated.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from qinglong.errors import Forbidden
from qinglong.service.accounts import LEVEL_SCOPE, ROLE_LEVEL, SCOPE_LEVEL, Level, Principal

LEVEL_ROLE = {Level.READ: "viewer", Level.OPERATE: "operator", Level.ADMIN: "admin"}


class Reach(Enum):
    PUBLIC = "public"
    SELF = "self"
    GLOBAL = "global"
    PROJECT = "project"
    RUN = "run"
    FLOW_RUN = "flow_run"
    LISTING = "listing"


def _capped(principal: Principal, level: int) -> int:
    return min(level, SCOPE_LEVEL[principal.scope]) if principal.scope is not None else level


def global_level(principal: Principal) -> int:
    """The level on every project (0: none); a token limited to projects has none."""
    if principal.projects is not None:
        return 0
    return _capped(principal, ROLE_LEVEL[principal.role])


def level_on(principal: Principal, project: str) -> int:
    """The level on one project: the global role or the project's grant, whichever is
    higher, capped by a token's scope; 0 outside a token's projects."""
    if principal.projects is not None and project not in principal.projects:
        return 0
    granted = max((ROLE_LEVEL[role] for name, role in principal.grants if name == project),
                  default=0)
    return _capped(principal, max(ROLE_LEVEL[principal.role], granted))


def levels(principal: Principal) -> dict[str, int]:
    """The level on each project granted (or named by a token), higher than the global one."""
    named: Iterable[str] = (principal.projects if principal.projects is not None
                            else (name for name, _ in principal.grants))
    floor = global_level(principal)
    return {name: level for name in sorted(set(named))
            if (level := level_on(principal, name)) > floor}


def reaches(principal: Principal, level: Level) -> bool:
    """True when the principal has ``level`` on at least one project."""
    return global_level(principal) >= level or any(
        found >= level for found in levels(principal).values())


def visible(principal: Principal) -> frozenset[str] | None:
    """The projects the principal may read (None: every project)."""
    if global_level(principal) >= Level.READ:
        return None
    return frozenset(name for name, level in levels(principal).items() if level >= Level.READ)


def _refuse(principal: Principal, level: Level, where: str, has: int) -> Forbidden:
    holds = LEVEL_SCOPE.get(Level(has), "no") if has else "no"
    how = f"token scope {principal.scope}" if principal.scope is not None else "role"
    if principal.projects is not None:
        how += ", token limited to " + ", ".join(principal.projects)
    return Forbidden(f"this needs the {LEVEL_SCOPE[level]} scope {where}; {principal.username} "
                     f"({how}) has {holds} access there")


def require_global(principal: Principal, level: Level) -> None:
    has = global_level(principal)
    if has < level:
        raise _refuse(principal, level, "on every project", has)


def require_on(principal: Principal, level: Level, project: str) -> None:
    has = level_on(principal, project)
    if has < level:
        raise _refuse(principal, level, f"on project {project}", has)


def require_somewhere(principal: Principal, level: Level) -> None:
    if not reaches(principal, level):
        raise _refuse(principal, level, "on some project", global_level(principal))
