"""Routes for per-project roles: what the caller may do (``/me``), and who holds a role on a
project (a project's admins manage its grants)."""

from __future__ import annotations

from qinglong.service.access import Reach
from qinglong.service.accounts import Level
from qinglong.service.grants import me_view
from qinglong.service.views import accounts as views
from qinglong.web import requests as rq
from qinglong.web.routing import Call, Endpoint, Reply

GRANTS = "/api/v1/projects/{project}/grants"


def me(call: Call) -> Reply:
    who = call.who
    on = None
    if who.via == "session":
        on = call.backend.second_factor.view(who.username, who.role, who.grants).enabled
    return Reply(me_view(who, on))


def list_grants(call: Call) -> Reply:
    return Reply(call.backend.grants.on_project(call.path["project"]))


def put_grant(call: Call) -> Reply:
    body: rq.GrantRequest = call.body
    project, username = call.path["project"], call.path["username"]
    view = call.backend.grants.put(username, project, body.role, call.who.username)
    call.audit("grant.put", project=project, target=f"user {username}",
               detail={"role": body.role})
    return Reply(view)


def remove_grant(call: Call) -> Reply:
    project, username = call.path["project"], call.path["username"]
    call.backend.grants.remove(username, project)
    call.audit("grant.remove", project=project, target=f"user {username}")
    return Reply(None, 204)


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/api/v1/me", me, "What you may do: your access on every project and on "
             "each project where it is higher", "accounts", Level.READ, response=views.MeView,
             reach=Reach.SELF),
    Endpoint("GET", GRANTS, list_grants, "Who holds a role on this project (besides the roles "
             "on every project)", "accounts", Level.READ, response=views.GrantView, many=True),
    Endpoint("PUT", GRANTS + "/{username}", put_grant, "Give a user a role on this project "
             "(replacing the one held there)", "accounts", Level.ADMIN, body=rq.GrantRequest,
             response=views.GrantView),
    Endpoint("DELETE", GRANTS + "/{username}", remove_grant, "Take a user's role on this "
             "project back", "accounts", Level.ADMIN, status=204),
)
