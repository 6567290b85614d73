"""The web panel at ``/``: server-rendered page shells, plus one hand-written script and one
style sheet (``static/``, no build step, nothing fetched from elsewhere) that fill them from
the HTTP API under /api/v1 with the session cookie and its CSRF token.

``panel_routes(backend)`` gives the routes ``create_web_app`` mounts beside the API's."""

from __future__ import annotations

from qinglong.web.panel.pages import panel_routes

__all__ = ["panel_routes"]
