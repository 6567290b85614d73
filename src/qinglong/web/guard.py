"""What every HTTP answer gets, whoever made it (a route, the panel, Starlette's own 404 or
405, an exception nobody caught): the security headers, and a problem object instead of a
traceback. ``AnswerGuard`` wraps the whole app, inside Starlette's last-resort error
middleware, so nothing answers around it."""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from qinglong.web.problems import internal_problem

# Set on every answer that does not set the header itself (the panel's static files are
# cached: they keep their own Cache-Control; its pages add a Content-Security-Policy).
SECURITY_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
                    "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"}


class AnswerGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_guarded(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    if name not in headers:
                        headers[name] = value
            await send(message)

        try:
            await self.app(scope, receive, send_guarded)
        except Exception as exc:
            if started:  # the status line is out: all that is left is to cut the answer
                raise
            await internal_problem(exc)(scope, receive, send_guarded)
