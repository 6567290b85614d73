"""The backfill route: `ql trigger backfill` over HTTP, with the same service (the same window
rules, limits and idempotency: repeating it admits nothing), admitting synchronously at
``API_RATE`` admissions per second and answering with what it admitted and skipped."""

from __future__ import annotations

from qinglong.domain.backfill import MAX_OCCURRENCES, BackfillRequest
from qinglong.domain.identifiers import entity_id, project_id
from qinglong.service.accounts import Level
from qinglong.service.backfill import plan_view, summary_view
from qinglong.service.views.reports import BackfillView
from qinglong.service.views.system import Problem
from qinglong.web import requests as rq
from qinglong.web.problems import problem_body
from qinglong.web.routing import Call, Endpoint, Reply, read_instant

API_RATE = 200.0  # admissions per second: a full window (10,000) answers within about a minute


def backfill(call: Call) -> Reply:
    body: rq.BackfillRequest = call.body
    request = BackfillRequest(
        project_id=project_id(call.path["project"]),
        trigger_id=entity_id(call.path["trigger"], "trigger"),
        from_ms=read_instant(body.from_, "from"), to_ms=read_instant(body.to, "to"),
        actor=call.who.username)
    backfills = call.backend.backfills
    plan = backfills.plan(request)  # refuses (writing nothing) a window that is not the past
    if body.dry_run:
        return Reply(plan_view(plan))
    progress = backfills.run(plan, rate=API_RATE, stop=call.backend.closing)
    view = summary_view(plan, progress, API_RATE)
    target = f"trigger {request.trigger_id}"
    if progress.error is not None:
        if not progress.admitted:
            raise progress.error  # nothing was written: the error is the answer
        view = view.model_copy(update={"error": Problem.model_validate(
            problem_body(progress.error))})
    call.audit("trigger.backfill", project=request.project_id, target=target,
               detail={"from": view.from_, "to": view.to, "state": view.state,
                       "admitted": progress.admitted, "already_had_run": progress.existing,
                       "skipped": progress.skipped})
    return Reply(view, 201 if progress.admitted else 200)


DESCRIPTION = (
    "The window [from, to] is judged against the trigger's current revision: it may start "
    "before the trigger was first published, must end before its cursor (the first "
    f"occurrence its scheduler has not decided yet) and may hold up to {MAX_OCCURRENCES:,} "
    "occurrences; otherwise 422 and nothing is written. Each occurrence without a Run is "
    "admitted in its own transaction, oldest first, at most "
    f"{API_RATE:g} per second, before the answer is sent (201 when Runs were admitted, else "
    "200): a repeated backfill admits nothing. An error after some admissions answers 200 "
    "with state failed and the error; send the same request again to carry on. dry_run: "
    "what would be admitted (to_admit, to_admit_ms), nothing written.")

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("POST", "/api/v1/projects/{project}/triggers/{trigger}/backfill", backfill,
             "Backfill a trigger: admit its past occurrences in a window that have no Run, "
             "one Run each", "triggers", Level.OPERATE, body=rq.BackfillRequest,
             response=BackfillView, also=(201,), description=DESCRIPTION,
             atomic=False),  # admits in chunks, each its own commit
)
