"""The dashboard's route: a page of triggers with their latest Run, success rate, lag and
next fire time, computed in the database for the whole page at once (service/dashboard.py
says what each figure means)."""

from __future__ import annotations

from qinglong.domain.identifiers import project_id
from qinglong.service.access import Reach
from qinglong.service.accounts import Level
from qinglong.service.dashboard import DEFAULT_PAGE, DEFAULT_WINDOW, MAX_PAGE, MAX_WINDOW
from qinglong.service.views.dashboard import TriggerSummaryPageView
from qinglong.web.routing import LABEL_FILTER, Call, Endpoint, Query, Reply


def trigger_summary(call: Call) -> Reply:
    q = call.query
    project = q["project"]
    mine = call.backend.pins.pinned(call.who, "trigger") if q["pins"] or q["pins_first"] \
        else None
    page = call.backend.summaries.page(
        None if project is None else project_id(project), cursor=q["cursor"],
        limit=q["limit"], window=q["window"], visible=call.visible, label=q["label"],
        pins_first=mine if q["pins_first"] else None)
    if mine is not None:  # which are the caller's pins
        page.items = call.backend.pins.marked(call.who, "trigger", page.items, mine)
    return Reply(page)


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/api/v1/triggers/summary", trigger_summary,
             "A page of triggers, each with its state, next fire time, latest Run, and the "
             "success rate and largest admission lag of its latest Runs (one query per page, "
             "whatever the number of triggers; of the projects you may read)", "triggers",
             Level.READ, response=TriggerSummaryPageView, reach=Reach.LISTING,
             query=(Query("project", "str", "Only this project"),
                    Query("limit", "int", "Triggers per page", 1, MAX_PAGE,
                          default=DEFAULT_PAGE),
                    Query("window", "int", "How many of each trigger's latest Runs (by "
                                           "occurrence) the success rate and lag cover", 1,
                          MAX_WINDOW, default=DEFAULT_WINDOW),
                    Query("cursor", "str", "next_cursor of the previous page"),
                    Query("label", "str", "Only the triggers with this label",
                          rule=LABEL_FILTER),
                    Query("pins", "bool", "Say which are your pins (pinned: true or false)",
                          default=False),
                    Query("pins_first", "bool", "Your pinned triggers first, on as many pages "
                                                "as they fill, then the others (each said "
                                                "pinned or not)", default=False))),
)
