"""The HTTP API (``/api/v1``): an ASGI app over the service layer, served by `ql serve --http`
and `ql web`. ``app.create_web_app`` builds it from the route table (``definitions``,
``runs``, ``account_routes``, ``system``); a panel can be added on top with more endpoints or
routes, under the same authentication."""

from __future__ import annotations
