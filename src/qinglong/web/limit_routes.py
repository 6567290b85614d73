"""Routes for the global limit: the cap on Runs executing at once across every executor, as
`ql limits` shows and sets it (the panel's Cluster page)."""

from __future__ import annotations

from qinglong.service.accounts import Level
from qinglong.service.views.system import LimitsView
from qinglong.web import requests as rq
from qinglong.web.routing import Call, Endpoint, Reply

LIMITS = "/api/v1/limits"


def show_limits(call: Call) -> Reply:
    return Reply(call.backend.catalog.limits())


def set_limits(call: Call) -> Reply:
    body: rq.LimitsRequest = call.body
    catalog = call.backend.catalog
    before = catalog.limits().global_
    catalog.global_limit_set(body.global_)
    call.audit("limits.set", target="global limit",
               detail={"global": body.global_, "was": before})
    return Reply(catalog.limits())


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", LIMITS, show_limits, "The global limit: at most this many Runs executing "
             "at once, everywhere (null: no cap)", "system", Level.READ, response=LimitsView),
    Endpoint("PUT", LIMITS, set_limits, "Set the global limit (null removes it); Runs already "
             "executing are not stopped, new ones wait in the queue while it is reached",
             "system", Level.ADMIN, body=rq.LimitsRequest, response=LimitsView),
)
