"""The panel's routes: one HTML shell per page, and the two static files.

A page is served only to a browser that asks for HTML (``Accept: text/html``) and holds a live
session cookie; a browser without one is sent to ``/login?next=...``. Anything else (an API
client, a script) gets what the API gives a route it does not have: 401 for a stranger, 404
otherwise. The shell carries who is logged in, the session's CSRF token (derived from the
cookie, as the login answer gives it) and the page's parameters as attributes; the script
reads them and fills the page from /api/v1. Nothing the database holds is rendered here, so
the only escaping needed is of the parameters, done with ``html.escape``. The pages' bodies
are in ``markup.py``.
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

from qinglong.errors import NotFound, QinglongError
from qinglong.service.accounts import Principal, csrf_token_for
from qinglong.web.auth import SESSION_COOKIE
from qinglong.web.backend import WebBackend
from qinglong.web.panel.markup import (
    ENVIRONMENT,
    FLOW_RUN,
    FLOWS,
    LOGIN,
    RUN,
    RUNS,
    SCRIPTS,
    STATS,
    SUBSCRIPTIONS,
    TASKS,
    TRIGGER,
)
from qinglong.web.panel.markup_account import ACCOUNT
from qinglong.web.panel.markup_admin import AUDIT, CLUSTER, NOTIFICATIONS, TOKENS, USERS
from qinglong.web.panel.markup_dashboard import DASHBOARD
from qinglong.web.panel.markup_editors import TASK_EDITOR, TRIGGER_EDITOR

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
       ("/flows", "Flows", "flows"), ("/scripts", "Scripts", "scripts"),
       ("/subscriptions", "Subscriptions", "subscriptions"),
       ("/environment", "Environment", "environment"),
       ("/stats", "Stats", "stats"), ("/notifications", "Notifications", "notifications"),
       ("/cluster", "Cluster", "cluster"), ("/tokens", "Tokens", "tokens"),
       ("/users", "Users", "users"), ("/audit", "Audit log", "audit"),
       ("/account", "Account", "account"))


@dataclass(frozen=True, slots=True)
class StaticFile:
    body: bytes
    media: str
    version: str  # the first 12 hex digits of its SHA-256: part of the URL, so caches refresh


# The scripts load in this order: editor.js (what the script editor needs), panel.js (the
# helpers, as window.QL, and the first pages), organise.js (labels, pins and saved filters: it
# wraps QL.api before the page scripts take it), then each page script, which adds its pages
# to QL.pages; the page is filled once all of them have loaded.
PAGE_SCRIPTS = ("editor.js", "panel.js", "organise.js", "editors.js", "controls.js", "admin.js",
                "dashboard.js", "account.js")
STATIC_FILES = (*PAGE_SCRIPTS, "panel.css")


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
    Page("/flows", "flows", "Flows", FLOWS),
    Page("/flows/runs/{flow_run}", "flow-run", "Flow run", FLOW_RUN, ("flow_run",)),
    Page("/scripts", "scripts", "Scripts", SCRIPTS),
    Page("/subscriptions", "subscriptions", "Subscriptions", SUBSCRIPTIONS),
    Page("/environment", "environment", "Environment", ENVIRONMENT),
    Page("/stats", "stats", "Stats", STATS),
    Page("/notifications", "notifications", "Notifications", NOTIFICATIONS),
    Page("/cluster", "cluster", "Cluster", CLUSTER),
    Page("/tokens", "tokens", "API tokens", TOKENS),
    Page("/users", "users", "Users", USERS),
    Page("/audit", "audit", "Audit log", AUDIT),
    Page("/account", "account", "Account", ACCOUNT),
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
            + "".join(f"<script src=\"{self._asset(name)}\" defer></script>"
                      for name in PAGE_SCRIPTS)
            + f"</head><body data-page=\"{_attr(page)}\"{attrs}>{nav}"
            + f"<main id=\"main\">{markup}</main></body></html>")

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
            if page.name != "account" and await run_in_threadpool(
                    self._backend.second_factor.enrolment_needed, principal.username,
                    principal.role, principal.grants,
                    principal.session_method):  # one who must have one enrols first
                return RedirectResponse("/account", status_code=303,
                                        headers={"Cache-Control": "no-store"})
            params = {name: str(request.path_params[name]) for name in page.params}
            attrs = {"user": principal.username, "role": principal.role,
                     "grants": " ".join(f"{name}:{role}" for name, role in principal.grants),
                     **params}
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
        markup, attrs = LOGIN, {"next": target}
        if self._backend.sso is not None:  # single sign-on: a plain link, no script needed
            start = _attr("/api/v1/sso/login?next=" + quote(target, safe="/"))
            markup += (f"<p class=\"sso\"><a id=\"login-sso\" href=\"{start}\">"
                       "Log in with single sign-on</a></p>")
            attrs["sso"] = "true"
        text = self._document(title="Log in", page="login", body_attrs=attrs,
                              nav="<header class=\"top\"><nav><span class=\"brand\">qinglong"
                                  "</span></nav></header>", markup=markup)
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
