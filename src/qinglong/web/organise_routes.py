"""Routes that organise tasks and triggers: their labels (set by an operator of the project,
outside the revisions), and the caller's own pins and saved filters (``/api/v1/me/...``,
reach self: each route asks about the project a pin names itself, service/pins.py)."""

from __future__ import annotations

from typing import Literal

from qinglong.domain.identifiers import entity_id, project_id
from qinglong.service.access import Reach
from qinglong.service.accounts import Level
from qinglong.service.views.organise import LabelsView, PinView, SavedFilterView
from qinglong.web import organise_requests as rq
from qinglong.web.requests import Empty
from qinglong.web.routing import Call, Endpoint, Query, Reply

P = "/api/v1/projects/{project}"
PINS = "/api/v1/me/pins"
FILTERS = "/api/v1/me/filters"
Kind = Literal["task", "trigger"]


def _target(call: Call, kind: Kind) -> tuple[str, str]:
    return project_id(call.path["project"]), entity_id(call.path[kind], kind)


def _labels(kind: Kind, clear: bool) -> Endpoint:
    def handler(call: Call) -> Reply:
        project, entity = _target(call, kind)
        wanted: list[str] = [] if clear else call.body.labels
        view = call.backend.labels.put(kind, project, entity, wanted)
        call.audit(f"{kind}.label", project=project, target=f"{kind} {entity}",
                   detail={"labels": view.labels})
        return Reply(view)

    path = f"{P}/{kind}s/{{{kind}}}/labels"
    if clear:
        return Endpoint("DELETE", path, handler, f"Clear a {kind}'s labels", f"{kind}s",
                        Level.OPERATE, response=LabelsView)
    return Endpoint("PUT", path, handler, f"Set a {kind}'s labels (the whole set; they are "
                    "not part of a revision: nothing is published)", f"{kind}s",
                    Level.OPERATE, body=rq.LabelsRequest, response=LabelsView)


def list_pins(call: Call) -> Reply:
    return Reply(call.backend.pins.pins(call.who, call.visible))


def _pin(kind: Kind, on: bool) -> Endpoint:
    def handler(call: Call) -> Reply:
        project, entity = _target(call, kind)
        if not on:
            call.backend.pins.unpin(call.who, kind, project, entity)
            return Reply(None, 204)
        view, added = call.backend.pins.pin(call.who, kind, project, entity)
        return Reply(view, 201 if added else 200)

    path = f"{PINS}/{{project}}/{kind}s/{{{kind}}}"
    if on:
        return Endpoint("PUT", path, handler, f"Pin a {kind} of a project you may read: it comes "
                        "first on your dashboard and tasks page (201; 200 when already pinned)",
                        "accounts", Level.READ, body=Empty, response=PinView, also=(201,),
                        reach=Reach.SELF)
    return Endpoint("DELETE", path, handler, f"Unpin a {kind}", "accounts", Level.READ, status=204,
                    reach=Reach.SELF)


def list_filters(call: Call) -> Reply:
    return Reply(call.backend.pins.filters(call.who, call.query["page"]))


def save_filter(call: Call) -> Reply:
    body: rq.SavedFilterRequest = call.body
    return Reply(call.backend.pins.save_filter(call.who, call.path["filter"], body.page,
                                               body.query))


def remove_filter(call: Call) -> Reply:
    call.backend.pins.remove_filter(call.who, call.path["filter"])
    return Reply(None, 204)


ENDPOINTS: tuple[Endpoint, ...] = (
    _labels("task", clear=False),
    _labels("task", clear=True),
    _labels("trigger", clear=False),
    _labels("trigger", clear=True),
    Endpoint("GET", PINS, list_pins, "Your pins of tasks and triggers (of the projects you may "
             "read), oldest first", "accounts", Level.READ, response=PinView, many=True,
             reach=Reach.SELF),
    _pin("task", on=True),
    _pin("task", on=False),
    _pin("trigger", on=True),
    _pin("trigger", on=False),
    Endpoint("GET", FILTERS, list_filters, "Your saved filters of the panel's pages, by name",
             "accounts", Level.READ, response=SavedFilterView, many=True, reach=Reach.SELF,
             query=(Query("page", "choice", "Only the filters of this page",
                          choices=("runs", "dashboard", "tasks")),)),
    Endpoint("PUT", FILTERS + "/{filter}", save_filter, "Save a filter of a panel page under a "
             "name (replacing the one of that name)", "accounts", Level.READ,
             body=rq.SavedFilterRequest, response=SavedFilterView, reach=Reach.SELF),
    Endpoint("DELETE", FILTERS + "/{filter}", remove_filter, "Delete a saved filter", "me",
             Level.READ, status=204, reach=Reach.SELF),
)
