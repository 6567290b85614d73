"""The panel's routes: one HTML shell per page, and the two static files.

A page is served only to a browser that asks for HTML (``Accept: text/html``) and holds a live
session cookie; a browser without one is sent to ``/login?next=...``. Anything else (an API
client, a script) gets what the API gives a route it does not have: 401 for a stranger, 404
otherwise. The shell carries who is logged in, the session's CSRF token (derived from the
cookie, as the login answer gives it) and the page's parameters as attributes; the script
reads them and fills the page from /api/v1. Nothing the database holds is rendered here, so
the only escaping needed is of the parameters, done with ``html.escape``.
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from qinglong.domain.task import DEFAULT_TIMEOUT_MS
from qinglong.errors import NotFound, QinglongError
from qinglong.service.accounts import Principal, csrf_token_for
from qinglong.web.auth import SESSION_COOKIE
from qinglong.web.backend import WebBackend

STATIC_PREFIX = "/static/panel/"
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
PAGE_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
                "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
                "Content-Security-Policy": CSP}
NAV = (("/", "Dashboard", "dashboard"), ("/tasks", "Tasks", "tasks"),
       ("/tasks/edit", "Task editor", "task-editor"),
       ("/triggers/edit", "Trigger editor", "trigger-editor"), ("/runs", "Runs", "runs"),
       ("/stats", "Stats", "stats"))


@dataclass(frozen=True, slots=True)
class StaticFile:
    body: bytes
    media: str
    version: str  # the first 12 hex digits of its SHA-256: part of the URL, so caches refresh


STATIC_FILES = ("panel.js", "panel.css")


def _load_static() -> dict[str, StaticFile]:
    """The script and the style sheet shipped in the package; an empty dict when they are not
    installed (the pages then say so, and the API is unaffected)."""
    found: dict[str, StaticFile] = {}
    folder = resources.files("qinglong.web.panel") / "static"
    for name in STATIC_FILES:
        try:
            body = (folder / name).read_bytes()
        except OSError:
            return {}
        media = STATIC_TYPES["." + name.rsplit(".", 1)[1]]
        found[name] = StaticFile(body, media, hashlib.sha256(body).hexdigest()[:12])
    return found


def _attr(value: str) -> str:
    return html.escape(value, quote=True)


def safe_next(value: str | None) -> str:
    """Where to go after logging in: a path of this site only (never another origin)."""
    if (not value or not value.startswith("/") or value.startswith(("//", "/login"))
            or "\\" in value or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value)
            or len(value) > 2000):
        return "/"
    return value


def wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


# --- the pages' bodies (static markup; the script fills the ids) ------------------------------

DASHBOARD = """
<h1>Dashboard</h1>
<p class="muted">Times in <span id="viewer-zone"></span> (your browser) and UTC.
  Updated <span id="updated">never</span>.</p>
<p id="problem" class="problem" hidden></p>
<section><h2>Triggers</h2>
<div class="table-scroll">
<table id="triggers" class="grid"><thead><tr><th>Trigger</th><th>Task</th><th>Schedule</th>
<th>State</th><th>Next fire (your zone)</th><th>Next fire (UTC)</th><th>Last Run</th>
<th>Success rate</th><th>Lag p99</th></tr></thead><tbody></tbody></table></div>
<p class="muted">Success rate and lag over each trigger's last 50 Runs.</p></section>
<section><h2>Recent Runs</h2>
<div class="table-scroll">
<table id="recent" class="grid"><thead><tr><th>Run</th><th>Project / task</th><th>Trigger</th>
<th>Scheduled for (your zone)</th><th>Status</th><th>Duration</th></tr></thead><tbody></tbody>
</table></div></section>
<section><h2>Processes</h2><p id="process-summary"></p>
<div class="table-scroll">
<table id="processes" class="grid"><thead><tr><th>Role</th><th>Id</th><th>Host</th><th>Pid</th>
<th>Started</th><th>Last seen</th><th>Alive</th></tr></thead><tbody></tbody></table></div></section>
"""

TASKS = """
<h1>Tasks</h1>
<p><a href="/tasks/edit" data-needs="admin">New task</a></p>
<p id="problem" class="problem" hidden></p>
<div class="table-scroll">
<table id="tasks" class="grid"><thead><tr><th>Project</th><th>Task</th><th>Command</th>
<th>Revision</th><th>Enabled</th><th>Environment (names only)</th><th>Timeout</th><th></th>
</tr></thead><tbody></tbody></table></div>
"""

TASK_EDITOR = f"""
<h1>Task editor</h1>
<p class="muted">Publishes a shell task: each publish appends a revision. Environment values
are write-only: they are sent once and never shown again.</p>
<form id="task-form" autocomplete="off">
<label>Project <input name="project" id="task-project" list="project-list" required
  placeholder="demo"></label>
<label>Task id <input name="task" id="task-id" required placeholder="hello"></label>
<label>Name <input name="name" id="task-name" placeholder="(optional)"></label>
<label>Shell <select name="shell" id="task-shell"><option value="/bin/sh">/bin/sh</option>
  <option value="/bin/bash">/bin/bash</option></select></label>
<label class="wide">Command <textarea name="command" id="task-command" rows="4" required
  spellcheck="false" placeholder="echo hello"></textarea></label>
<label>Working directory <input name="working_directory" id="task-wd" spellcheck="false"
  placeholder="(none) an absolute path"></label>
<label>Timeout <input name="timeout" id="task-timeout" spellcheck="false"
  placeholder="30s, 5m, 1h30m (new tasks: {DEFAULT_TIMEOUT_MS // 60_000}m)"
  aria-describedby="task-timeout-note">
  <span id="task-timeout-note" class="muted" role="status"></span></label>
<fieldset class="wide"><legend>Environment</legend>
<ul id="env-existing" class="plain"></ul>
<div id="env-new"></div>
<button type="button" id="env-add">Add an entry</button>
</fieldset>
<p class="wide"><button type="submit" id="task-publish" data-needs="admin">Publish</button>
  <span id="task-result" role="status"></span></p>
</form>
<datalist id="project-list"></datalist>
"""

TRIGGER_EDITOR = """
<h1>Trigger editor</h1>
<p class="muted">Publishes a trigger bound to a task: a cron expression (5 fields, or 6 with
seconds first), <code>every 90s</code> (optionally <code>from</code> an instant) or
<code>at</code> an instant. The preview below follows what you type. Fields left empty keep
a trigger's current value.</p>
<form id="trigger-form" autocomplete="off">
<label>Project <input name="project" id="trigger-project" list="project-list" required
  placeholder="demo"></label>
<label>Trigger id <input name="trigger" id="trigger-id" required placeholder="nightly"></label>
<label>Task <select name="task" id="trigger-task" required></select></label>
<label>Schedule <input name="schedule" id="trigger-cron" required spellcheck="false"
  placeholder="30 2 * * *, every 90s, at 2027-01-01T09:00:00Z"></label>
<label>Time zone <input name="timezone" id="trigger-timezone" list="zone-list" required
  spellcheck="false"></label>
<label>Misfire <select name="misfire" id="trigger-misfire"><option value="">(keep / default)
  </option><option value="skip">skip</option><option value="fire_once">fire_once</option>
  </select></label>
<label>Overlap <select name="overlap" id="trigger-overlap"><option value="">(keep / default)
  </option><option value="allow">allow</option><option value="skip">skip</option>
  <option value="queue">queue</option><option value="cancel_previous">cancel_previous</option>
  </select></label>
<label>DST gap (cron) <select name="dst_gap" id="trigger-dst-gap"><option value="">(keep /
  default: shift)</option><option value="shift">shift</option><option value="skip">skip
  </option></select></label>
<label>DST overlap (cron) <select name="dst_overlap" id="trigger-dst-overlap"><option value="">
  (keep / default: first)</option><option value="first">first</option><option value="second">
  second</option><option value="both">both</option></select></label>
<label>Jitter, seconds <input name="jitter_s" id="trigger-jitter" type="number" min="0"
  max="3600" step="1" placeholder="(keep / none)"></label>
<label>Random part, seconds <input name="jitter_random_s" id="trigger-jitter-random"
  type="number" min="0" max="3600" step="1" placeholder="(keep / 0)"></label>
<p class="wide"><button type="submit" id="trigger-publish" data-needs="admin">Publish</button>
  <span id="trigger-result" role="status"></span></p>
</form>
<section><h2>Preview</h2><p id="preview-state" class="muted">Type a schedule.</p>
<div class="table-scroll">
<table id="preview" class="grid"><thead><tr><th>#</th><th>In the trigger's zone</th>
<th>Your zone</th><th>UTC</th><th>DST</th></tr></thead><tbody></tbody></table></div></section>
<datalist id="project-list"></datalist><datalist id="zone-list"></datalist>
"""

TRIGGER = """
<h1>Trigger <span id="trigger-title"></span></h1>
<p id="problem" class="problem" hidden></p>
<p class="actions"><button type="button" id="trigger-fire" data-needs="operate">Fire now</button>
<a id="trigger-edit" data-needs="admin">Edit</a> <a id="trigger-runs">Runs</a>
<span id="trigger-action-result" role="status"></span></p>
<form id="pause-form" class="inline" data-needs="operate" autocomplete="off">
<label>Pause until <input id="pause-until" spellcheck="false"
  placeholder="(until resumed), 10m, 2h or 2027-01-01T09:00:00Z"></label>
<label>Reason <input id="pause-reason" maxlength="500" placeholder="(optional)"></label>
<button type="submit" id="trigger-pause">Pause</button>
<button type="button" id="trigger-resume">Resume</button></form>
<dl id="trigger-details" class="details"></dl>
<section><h2>Next fires</h2>
<div class="table-scroll">
<table id="next-fires" class="grid"><thead><tr><th>In the trigger's zone</th><th>Your zone</th>
<th>UTC</th></tr></thead><tbody></tbody></table></div></section>
<section><h2>Occurrence ledger</h2>
<form id="ledger-form" class="inline"><label>Window <select id="ledger-window">
<option value="3600000">last hour</option><option value="21600000">last 6 hours</option>
<option value="86400000">last 24 hours</option><option value="604800000">last 7 days</option>
</select></label><label>At most <select id="ledger-limit"><option>50</option><option>200
</option><option>1000</option></select></label></form>
<p id="ledger-counts" class="muted"></p>
<div class="table-scroll">
<table id="ledger" class="grid"><thead><tr><th>Nominal time (trigger's zone)</th>
<th>Your zone</th><th>UTC</th><th>Revision</th><th>Fate</th><th>Runs</th></tr></thead>
<tbody></tbody></table></div></section>
"""

RUNS = """
<h1>Runs</h1>
<form id="run-filter" class="inline">
<label>Status <select id="filter-status" name="status"><option value="">(any)</option>
<option>created</option><option>queued</option><option>dispatching</option>
<option>running</option><option>waiting_approval</option><option>retry_wait</option>
<option>succeeded</option><option>failed</option><option>cancelled</option>
<option>timed_out</option><option>lost</option></select></label>
<label>Project <input id="filter-project" name="project" size="12"></label>
<label>Task <input id="filter-task" name="task" size="12"></label>
<label>Trigger <input id="filter-trigger" name="trigger" size="12"></label>
<button type="submit">Apply</button></form>
<p id="problem" class="problem" hidden></p>
<div class="table-scroll">
<table id="runs" class="grid"><thead><tr><th>Run</th><th>Project / task</th><th>Trigger</th>
<th>Type</th><th>Scheduled for (your zone)</th><th>Admitted (your zone)</th><th>Status</th>
<th>Duration</th><th>Exit</th></tr></thead><tbody></tbody></table></div>
<p class="pager"><button type="button" id="page-prev">Previous</button>
<span id="page-label"></span> <button type="button" id="page-next">Next</button></p>
"""

RUN = """
<h1>Run <span id="run-title"></span> <span id="run-status"></span></h1>
<p id="problem" class="problem" hidden></p>
<p class="actions"><button type="button" id="run-cancel" data-needs="operate" hidden>Cancel
</button> <span id="cancel-result" role="status"></span></p>
<dl id="run-details" class="details"></dl>
<section><h2>Attempts</h2>
<div class="table-scroll">
<table id="attempts" class="grid"><thead><tr><th>#</th><th>Status</th><th>Executor</th>
<th>Pid</th><th>Started</th><th>Finished</th><th>Exit</th><th>Error</th></tr></thead>
<tbody></tbody></table></div></section>
<section><h2>Timeline</h2><ol id="timeline" class="timeline"></ol></section>
<section><h2>Log</h2><p id="log-state" class="muted">waiting for the first attempt</p>
<pre id="log" class="log"></pre></section>
"""

STATS = """
<h1>Stats</h1>
<form id="stats-form" class="inline">
<label>Project <select id="stats-project"></select></label>
<label>Task <select id="stats-task"><option value="">(every task)</option></select></label>
<label>Days <select id="stats-days"><option>7</option><option>14</option><option>30</option>
<option>90</option></select></label></form>
<p id="problem" class="problem" hidden></p>
<p id="stats-zone" class="muted"></p>
<figure><div id="stats-chart"></div><figcaption id="stats-legend" class="legend">
</figcaption></figure>
<section><h2>Totals per task</h2>
<div class="table-scroll">
<table id="stats-totals" class="grid"><thead><tr><th>Task</th><th>Runs</th><th>Successes</th>
<th>Failures</th><th>Cancelled</th><th>Success rate</th><th>Average duration</th>
<th>Longest</th></tr></thead><tbody></tbody></table></div></section>
<section><h2>Per day</h2>
<div class="table-scroll">
<table id="stats-days-table" class="grid"><thead><tr><th>Day</th><th>Task</th><th>Runs</th>
<th>Successes</th><th>Failures</th><th>Cancelled</th><th>Total duration</th><th>Longest</th>
</tr></thead><tbody></tbody></table></div></section>
"""

LOGIN = """
<h1>Log in</h1>
<form id="login-form" class="login" autocomplete="on">
<label>User name <input name="username" id="login-username" autocomplete="username" required
  autofocus></label>
<label>Password <input name="password" id="login-password" type="password"
  autocomplete="current-password" required></label>
<p><button type="submit" id="login-submit">Log in</button></p>
<p id="login-error" class="problem" role="alert" hidden></p>
</form>
"""


@dataclass(frozen=True, slots=True)
class Page:
    path: str
    name: str  # the body's data-page: which part of the script fills it
    title: str
    markup: str
    params: tuple[str, ...] = ()  # path parameters passed on as data-* attributes


PAGES = (
    Page("/", "dashboard", "Dashboard", DASHBOARD),
    Page("/tasks", "tasks", "Tasks", TASKS),
    Page("/tasks/edit", "task-editor", "Task editor", TASK_EDITOR),
    Page("/triggers/edit", "trigger-editor", "Trigger editor", TRIGGER_EDITOR),
    Page("/triggers/{project}/{trigger}", "trigger", "Trigger", TRIGGER,
         ("project", "trigger")),
    Page("/runs", "runs", "Runs", RUNS),
    Page("/runs/{run}", "run", "Run", RUN, ("run",)),
    Page("/stats", "stats", "Stats", STATS),
)


class Panel:
    def __init__(self, backend: WebBackend) -> None:
        self._backend = backend
        self._static = _load_static()

    def _asset(self, name: str) -> str:
        return f"{STATIC_PREFIX}{name}?v={self._static[name].version}"

    def _document(self, *, title: str, page: str, body_attrs: dict[str, str], nav: str,
                  markup: str, csrf: str = "") -> str:
        attrs = "".join(f' data-{key}="{_attr(value)}"' for key, value in body_attrs.items())
        return (
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)} · qinglong</title>"
            "<link rel=\"icon\" href=\"data:,\">"
            f"<link rel=\"stylesheet\" href=\"{self._asset('panel.css')}\">"
            f"<meta name=\"ql-csrf\" content=\"{_attr(csrf)}\">"
            f"<script src=\"{self._asset('panel.js')}\" defer></script>"
            f"</head><body data-page=\"{_attr(page)}\"{attrs}>{nav}"
            f"<main id=\"main\">{markup}</main></body></html>")

    @staticmethod
    def _nav(principal: Principal, current: str) -> str:
        current_mark = ' aria-current="page"'
        links = "".join(
            f"<a href=\"{href}\"{current_mark if name == current else ''}>"
            f"{html.escape(label)}</a>" for href, label, name in NAV)
        return (f"<header class=\"top\"><nav><span class=\"brand\">qinglong</span>{links}</nav>"
                f"<span class=\"who\"><span id=\"who\">{html.escape(principal.username)}</span>"
                f" ({html.escape(principal.role)}) <button type=\"button\" id=\"logout\">Log out"
                "</button></span></header>")

    async def _session(self, request: Request) -> tuple[Principal, str] | None:
        secret = request.cookies.get(SESSION_COOKIE)
        if not secret:
            return None
        principal = await run_in_threadpool(self._backend.accounts.session_principal, secret)
        if principal is None:
            return None
        return principal, secret

    @staticmethod
    def _to_login(request: Request) -> Response:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        response = RedirectResponse("/login?next=" + quote(safe_next(target), safe="/"),
                                    status_code=303, headers={"Cache-Control": "no-store"})
        if request.cookies.get(SESSION_COOKIE):
            response.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True,
                                   samesite="strict")
        return response

    @staticmethod
    def _unavailable(exc: QinglongError) -> Response:
        text = (f"<!doctype html><meta charset=\"utf-8\"><title>qinglong</title><h1>The panel is "
                f"unavailable</h1><p>{html.escape(exc.code)}: {html.escape(exc.message)}</p>")
        return HTMLResponse(text, status_code=503, headers=PAGE_HEADERS)

    def page_handler(self, page: Page) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            if not wants_html(request):
                raise HTTPException(404)  # the API's answer: 401 for a stranger, else 404
            if not self._static:
                return self._unavailable(NotFound("panel files", "qinglong/web/panel/static"))
            try:
                found = await self._session(request)
            except QinglongError as exc:
                return self._unavailable(exc)
            if found is None:
                return self._to_login(request)
            principal, secret = found
            params = {name: str(request.path_params[name]) for name in page.params}
            attrs = {"user": principal.username, "role": principal.role, **params}
            text = self._document(title=page.title, page=page.name, body_attrs=attrs,
                                  nav=self._nav(principal, page.name), markup=page.markup,
                                  csrf=csrf_token_for(secret))
            return HTMLResponse(text, headers=PAGE_HEADERS)

        return handle

    async def login(self, request: Request) -> Response:
        if not wants_html(request):
            raise HTTPException(404)
        if not self._static:
            return self._unavailable(NotFound("panel files", "qinglong/web/panel/static"))
        target = safe_next(request.query_params.get("next"))
        try:
            found = await self._session(request)
        except QinglongError as exc:
            return self._unavailable(exc)
        if found is not None:
            return RedirectResponse(target, status_code=303, headers={"Cache-Control": "no-store"})
        text = self._document(title="Log in", page="login", body_attrs={"next": target},
                              nav="<header class=\"top\"><nav><span class=\"brand\">qinglong"
                                  "</span></nav></header>", markup=LOGIN)
        return HTMLResponse(text, headers=PAGE_HEADERS)

    async def static(self, request: Request) -> Response:
        found = self._static.get(str(request.path_params["name"]))
        if found is None:
            raise HTTPException(404)
        return Response(found.body, media_type=found.media,
                        headers={"Cache-Control": "public, max-age=3600",
                                 "X-Content-Type-Options": "nosniff"})

    def routes(self) -> list[BaseRoute]:
        found: list[BaseRoute] = [
            Route("/login", self.login, methods=["GET", "HEAD"], name="panel:login"),
            Route(STATIC_PREFIX + "{name}", self.static, methods=["GET", "HEAD"],
                  name="panel:static"),
        ]
        found += [Route(page.path, self.page_handler(page), methods=["GET", "HEAD"],
                        name=f"panel:{page.name}") for page in PAGES]
        return found


def panel_routes(backend: WebBackend) -> list[BaseRoute]:
    """The panel's pages and static files, to mount beside the API's routes."""
    return Panel(backend).routes()
