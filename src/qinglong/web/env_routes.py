"""Routes for a project's environment (docs/controls/environments.md): read it (names, flags,
descriptions, plain values; a secret's value never), set and remove an entry, and its
history. Each change is a new revision with its audit entry, in the request's one
transaction; a secret's value goes in and never comes out."""

from __future__ import annotations

from qinglong.domain.identifiers import project_id
from qinglong.service import project_env as views
from qinglong.service.accounts import Level
from qinglong.service.project_env import EnvActor, environments
from qinglong.web.requests import Request
from qinglong.web.routing import Call, Endpoint, Query, Reply

E = "/api/v1/projects/{project}/environment"


class EnvSetRequest(Request):
    """Fields left out keep what the entry has (a new entry needs its value; it is plain,
    enabled and undescribed unless said otherwise)."""

    value: str | None = None  # write-only: never in an answer when secret
    secret: bool | None = None
    enabled: bool | None = None
    description: str | None = None


def _actor(call: Call) -> EnvActor:
    who = call.who
    return EnvActor(username=who.username, via=who.via, token_id=who.token_id,
                    client=call.client)


def show_environment(call: Call) -> Reply:
    return Reply(environments(call.backend).show(project_id(call.path["project"])))


def set_entry(call: Call) -> Reply:
    body: EnvSetRequest = call.body
    view = environments(call.backend).set(
        project_id(call.path["project"]), call.path["variable"], _actor(call), value=body.value,
        secret=body.secret, enabled=body.enabled, description=body.description)
    return Reply(view)


def remove_entry(call: Call) -> Reply:
    return Reply(environments(call.backend).remove(
        project_id(call.path["project"]), call.path["variable"], _actor(call)))


def history(call: Call) -> Reply:
    q = call.query
    return Reply(environments(call.backend).history(
        project_id(call.path["project"]), before=q["before"], limit=q["limit"]))


ENDPOINTS: tuple[Endpoint, ...] = (  # history first: its path also fits {variable}
    Endpoint("GET", E, show_environment, "Show a project's environment at its latest "
             "revision: each entry's name, flags, description and value digest (a plain "
             "value too; a secret's never)", "environments", Level.READ,
             response=views.EnvView),
    Endpoint("GET", f"{E}/history", history, "A project's environment revisions, newest "
             "first: who changed which entry and what, never a value", "environments",
             Level.READ, response=views.EnvRevisionView, many=True,
             query=(Query("limit", "int", "At most this many", 1, 1000, default=50),
                    Query("before", "int", "Only revisions before this one", 1,
                          2_147_483_647))),
    Endpoint("PUT", f"{E}/{{variable}}", set_entry, "Set one entry of a project's "
             "environment (a new revision, unless nothing changes: then `changed` is false); "
             "a secret's value is sealed with the server's key (QL_SECRET_KEY_MISSING without "
             "one)", "environments", Level.ADMIN, body=EnvSetRequest,
             response=views.EnvChangeView),
    Endpoint("DELETE", f"{E}/{{variable}}", remove_entry, "Remove one entry of a project's "
             "environment (a new revision)", "environments", Level.ADMIN,
             response=views.EnvView),
)
