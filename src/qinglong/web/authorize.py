"""Whether the caller may use a route, on what it acts (service.access decides): asked by the
dispatcher after authentication and before the request's body is read, so a refused request
reads and writes nothing.

A route on a Run or a flow run first looks up its project (blocking: on a worker thread); one
the caller may not read answers 404 exactly as one that does not exist.
"""

from __future__ import annotations

from collections.abc import Mapping

from qinglong.domain.identifiers import WHOLE_UUID
from qinglong.errors import InvalidInput, NotFound
from qinglong.service.access import (
    Reach,
    global_level,
    level_on,
    require_global,
    require_on,
    require_somewhere,
)
from qinglong.service.accounts import Level, Principal
from qinglong.web.backend import WebBackend
from qinglong.web.routing import Endpoint, read_path


def needs_lookup(endpoint: Endpoint, principal: Principal) -> bool:
    """True when judging the request needs the project of a Run or flow run (a database read):
    not for a caller whose access on every project settles it."""
    return (endpoint.access in (Reach.RUN, Reach.FLOW_RUN) and endpoint.level is not None
            and global_level(principal) < endpoint.level)


def authorize(endpoint: Endpoint, principal: Principal, path_params: Mapping[str, object],
              query_params: Mapping[str, str]) -> None:
    """Refuse (403) what needs no lookup; RUN and FLOW_RUN routes go to ``authorize_entity``."""
    level = endpoint.level
    if level is None:
        return
    reach = endpoint.access
    if reach is Reach.SELF:
        return
    if reach is Reach.GLOBAL:
        require_global(principal, level)
    elif reach is Reach.PROJECT:
        require_on(principal, level, str(path_params.get("project", "")))
    elif reach is Reach.LISTING:
        named = query_params.get("project")
        if named:
            require_on(principal, level, named)
        else:
            require_somewhere(principal, level)
    else:  # RUN, FLOW_RUN: the level somewhere now, on the entity's project after a lookup
        require_somewhere(principal, level)


def authorize_entity(backend: WebBackend, endpoint: Endpoint, principal: Principal,
                     path_params: Mapping[str, str]) -> None:
    """The project of the Run or flow run the route names, then the level on it."""
    assert endpoint.level is not None
    path = read_path(path_params)
    param, what = ("run", "run") if endpoint.access is Reach.RUN else ("flow_run", "flow run")
    ref = path[param]
    if global_level(principal) < Level.READ and not WHOLE_UUID.fullmatch(ref):
        # a prefix is looked up among every project's ids: "ambiguous" would tell a tenant
        # that another project holds an id starting so
        raise InvalidInput(param, "give the whole id: a prefix is looked up across every "
                                  "project, which only a user who may read every project "
                                  "may do")
    if endpoint.access is Reach.RUN:
        project = backend.runs.run_show(ref, 0).run.project
    else:
        project = backend.flows.show(ref).project
    if level_on(principal, project) < Level.READ:
        raise NotFound(what, ref)
    require_on(principal, endpoint.level, project)
