"""Routes for scripts (docs/scripts.md): list, read, save, remove, history and diff. A script's
path holds slashes, so it is a query parameter (``?path=jd/sign.py``) rather than part of the
URL. Saving or removing one changes what tasks run: an admin's write, like publishing."""

from __future__ import annotations

from qinglong.domain.identifiers import project_id
from qinglong.domain.scripts import MAX_SCRIPT_BYTES
from qinglong.errors import InvalidInput, PayloadTooLarge
from qinglong.service.accounts import Level
from qinglong.service.views import scripts as views
from qinglong.web import requests as rq
from qinglong.web.routing import Call, Endpoint, Query, Reply

S = "/api/v1/projects/{project}/scripts"
PATH = Query("path", "str", "The script's path in its project, e.g. jd/sign.py", required=True)


def _project(call: Call) -> str:
    return project_id(call.path["project"])


def list_scripts(call: Call) -> Reply:
    return Reply(call.backend.scripts.listing(_project(call), call.query["prefix"] or "",
                                              removed=bool(call.query["all"])))


def read_script(call: Call) -> Reply:
    return Reply(call.backend.scripts.get(_project(call), call.query["path"],
                                          call.query["revision"]))


def save_script(call: Call) -> Reply:
    project = _project(call)
    body: rq.ScriptSaveRequest = call.body
    content = body.content.encode("utf-8")
    if len(content) > MAX_SCRIPT_BYTES:  # said as a script's limit, not the body's
        raise PayloadTooLarge(f"a script may be at most {MAX_SCRIPT_BYTES:,} bytes "
                              f"(this one is {len(content):,})")
    view = call.backend.scripts.put(project, body.path, content, call.who.username,
                                    expected_revision=body.expected_revision,
                                    keep_tasks=body.keep_tasks)
    if view.changed:
        call.audit("script.save", project=project, target=f"script {body.path}",
                   detail={"revision": view.revision, "digest": view.digest,
                           "tasks_updated": view.tasks_updated})
    return Reply(view, 201 if view.changed else 200)


def remove_script(call: Call) -> Reply:
    project = _project(call)
    path = call.query["path"]
    if path is None:  # checked here, after the body: a DELETE's body is refused first
        raise InvalidInput("path", "is required: ?path=the/script.py")
    view, still = call.backend.scripts.remove(project, path, call.who.username,
                                              call.query["expected_revision"])
    call.audit("script.remove", project=project, target=f"script {path}",
               detail={"revision": view.revision, "tasks_still_running_it": still})
    return Reply(view)


def script_history(call: Call) -> Reply:
    return Reply(call.backend.scripts.history(_project(call), call.query["path"],
                                              call.query["limit"]))


def script_diff(call: Call) -> Reply:
    return Reply(call.backend.scripts.diff(_project(call), call.query["path"],
                                           call.query["from"], call.query["to"]))


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", S, list_scripts, "List a project's scripts at their current revision",
             "scripts", Level.READ, response=views.ScriptView, many=True,
             query=(Query("prefix", "str", "Only the scripts under this folder"),
                    Query("all", "bool", "Include removed scripts", default=False))),
    Endpoint("GET", f"{S}/content", read_script, "Read a script's content (the current "
             "revision, or the one asked for), verified against its SHA-256", "scripts",
             Level.READ, response=views.ScriptContentView,
             query=(PATH, Query("revision", "int", "That revision", 1))),
    Endpoint("PUT", f"{S}/content", save_script, "Save a script as its next revision (the same "
             "content again: 200, nothing written; else 201) and move the tasks that run it "
             "onto it", "scripts", Level.ADMIN, body=rq.ScriptSaveRequest,
             response=views.ScriptSaveView, also=(201,)),
    Endpoint("DELETE", f"{S}/content", remove_script, "Remove a script (its history stays; "
             "tasks that run it keep the content they pinned)", "scripts", Level.ADMIN,
             response=views.ScriptView,
             query=(PATH,
                    Query("expected_revision", "int", "Only if still at this revision",
                                1))),
    Endpoint("GET", f"{S}/history", script_history, "Every revision of a script, newest first",
             "scripts", Level.READ, response=views.ScriptView, many=True,
             query=(PATH, Query("limit", "int", "How many", 1, 1000, default=100))),
    Endpoint("GET", f"{S}/diff", script_diff, "The unified diff between two revisions of a "
             "script (default: the one before the current to the current)", "scripts",
             Level.READ, response=views.ScriptDiffView,
             query=(PATH, Query("from", "int", "From this revision (0: empty)", 0),
                    Query("to", "int", "To this revision", 1))),
)
