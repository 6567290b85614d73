"""Routes of single sign-on with OpenID Connect (service/sso.py says the flow): the start,
which sends the browser to the provider, and the callback it comes back to. Both are public
(they are how one logs in). A failure is a problem object, or, for a browser (``Accept:
text/html``), a page saying what went wrong with a link back to the login page; never a
traceback.

After a login the browser gets the session cookie and, since that cookie is
``SameSite=Strict`` and the callback is a navigation that started on the provider's site
(the browser would not send the cookie along a redirect chain that began there), a page that
moves on to ``next`` by itself (a meta refresh starts a navigation of this site); any other
client gets a 303 to ``next``.
"""

from __future__ import annotations

import html
import re
from urllib.parse import quote, urlsplit

from starlette.requests import cookie_parser
from starlette.responses import HTMLResponse, RedirectResponse, Response

from qinglong.errors import BadRequest, NotFound, QinglongError
from qinglong.service.sso import STARTS_PER_ADDRESS, SingleSignOn
from qinglong.service.sso_settings import CALLBACK_PATH, loopback
from qinglong.web.auth import set_session_cookie
from qinglong.web.panel.pages import PAGE_HEADERS, safe_next
from qinglong.web.problems import problem_response, status_for
from qinglong.web.routing import Call, Endpoint, Query

LOGIN = "/api/v1/sso/login"
STATE_COOKIE = "ql_sso_state"  # the state of the login this browser started (callback only)
HOST = re.compile(r"^(?:[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?$")
_NO_STORE = {"Cache-Control": "no-store"}


def _sso(call: Call) -> SingleSignOn:
    if call.backend.sso is None:
        raise NotFound("single sign-on", "configuration (start ql with --oidc-issuer)")
    return call.backend.sso


def _wants_html(call: Call) -> bool:
    return "text/html" in call.headers.get("accept", "")


def _page(title: str, text: str, *, status: int, refresh: str | None = None) -> HTMLResponse:
    meta = ""
    if refresh is not None:
        meta = f'<meta http-equiv="refresh" content="0;url={html.escape(refresh, quote=True)}">'
    body = (f'<!doctype html><html lang="en"><head><meta charset="utf-8">{meta}'
            f"<title>{html.escape(title)} · qinglong</title></head><body><main>"
            f"<h1>{html.escape(title)}</h1>{text}</main></body></html>")
    return HTMLResponse(body, status_code=status, headers=PAGE_HEADERS)


def _failed(call: Call, exc: QinglongError) -> Response:
    if not _wants_html(call):
        return problem_response(exc)
    text = (f'<p id="sso-error" role="alert">{html.escape(exc.code)}: '
            f'{html.escape(exc.message)}</p><p><a href="/login">Back to the login page</a></p>')
    return _page("Single sign-on failed", text, status=status_for(exc))


def _origin(call: Call) -> str:
    """This server's origin as the browser sees it: https, except on a loopback host (where
    the Secure cookie works over plain http too, as the password login allows)."""
    host = call.headers.get("host", "")
    if not HOST.fullmatch(host):
        raise BadRequest("the Host header is not a host name: the callback URL cannot be "
                         "made from it (or start ql with --oidc-redirect-uri)")
    name = urlsplit("//" + host).hostname or ""
    return ("http" if loopback(name) else "https") + "://" + host


def sso_login(call: Call) -> Response:
    try:
        sso = _sso(call)
        started = sso.start(safe_next(call.query["next"]),
                            origin="" if sso.provider.settings.redirect_uri else _origin(call),
                            client=call.client)
    except QinglongError as exc:
        return _failed(call, exc)
    response = RedirectResponse(started.url, status_code=303, headers=_NO_STORE)
    response.set_cookie(STATE_COOKIE, started.state,
                        max_age=sso.provider.settings.pending_lifetime_ms // 1000,
                        path=CALLBACK_PATH, secure=True, httponly=True, samesite="lax")
    return response


def sso_callback(call: Call) -> Response:
    query = call.query
    try:
        sso = _sso(call)
        done = sso.finish(state=query["state"], code=query["code"], error=query["error"],
                          error_description=query["error_description"], issuer=query["iss"],
                          browser_state=_cookie(call, STATE_COOKIE), client=call.client)
    except QinglongError as exc:
        refused = _failed(call, exc)
        refused.delete_cookie(STATE_COOKIE, path=CALLBACK_PATH, secure=True, httponly=True,
                              samesite="lax")
        return refused
    target = safe_next(done.next_path)
    if _wants_html(call):
        link = html.escape(target, quote=True)
        response: Response = _page(
            "Logged in", f'<p>Logged in as {html.escape(done.username)}. '
                         f'<a id="sso-next" href="{link}">Continue</a></p>',
            status=200, refresh=quote(target, safe="/?&=%#:;,+-_.~"))
    else:
        response = RedirectResponse(target, status_code=303, headers=_NO_STORE)
    response.delete_cookie(STATE_COOKIE, path=CALLBACK_PATH, secure=True, httponly=True,
                           samesite="lax")
    set_session_cookie(response, done.secret,
                       call.backend.accounts.policy.lifetime_ms // 1000)
    return response


def _cookie(call: Call, name: str) -> str | None:
    return cookie_parser(call.headers.get("cookie", "")).get(name)


_TEXT = "str"
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", LOGIN, sso_login, "Log in with single sign-on: a redirect (303) to the "
             "OpenID Connect provider", "accounts", None,
             query=(Query("next", _TEXT, "Where to go after logging in (a path of this site)"),),
             status=303,
             description="Starts the authorization code flow with PKCE (S256): state, nonce and "
                         "verifier are kept server-side for 10 minutes, used once; the browser "
                         "gets the state in the cookie ql_sso_state (for the callback only). "
                         f"{STARTS_PER_ADDRESS} starts per client address in 10 minutes, "
                         "then 429 with Retry-After. 404 when single sign-on is not "
                         "configured."),
    Endpoint("GET", CALLBACK_PATH, sso_callback, "Where the provider sends the browser back: "
             "the session cookie and a redirect to next", "accounts", None,
             query=tuple(Query(name, _TEXT, what) for name, what in (
                 ("code", "The authorization code"), ("state", "The login's state"),
                 ("error", "The provider's error code"),
                 ("error_description", "The provider's explanation"),
                 ("error_uri", "The provider's page about the error"),
                 ("iss", "The issuer (RFC 9207)"), ("session_state", "The provider's session"),
                 ("scope", "The scopes granted"))),
             status=303, also=(200,), media="text/html", medias=("text/html",),
             description="Exchanges the code (with the PKCE verifier and the client's "
                         "credentials), checks the ID token (signature by the issuer's JWKS, "
                         "iss, aud, exp and iat, nonce), finds the user by the configured claim "
                         "and creates a session as POST /api/v1/session does. 401 "
                         "QL_SSO_REFUSED saying why (bad, replayed or expired state, another "
                         "browser, a token that does not hold, an unknown, disabled or "
                         "differently linked user); 502 when the provider fails. A browser gets "
                         "a page (200 with a refresh to next, or the error)."),
)
