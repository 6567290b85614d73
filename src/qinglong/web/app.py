"""The HTTP API as an ASGI app: ``create_web_app(backend, clock)``.

Every request goes the same way: credentials (token or session cookie) -> authentication
(nothing but /livez, /readyz and the login answers without it: 401) -> the route's scope
(403) -> the CSRF token of a session write (403) -> the path parameters, the query string
and the JSON body, read strictly (400, 413, 415, 422; see routing) -> the handler, on a
worker thread (the service layer is blocking; a write as one unit of work with its audit
row, see ``Endpoint.atomic``) -> JSON, or a problem object for any error. An
unknown route or method is 404 or 405 only for someone authenticated. Every answer, whoever
made it, carries the security headers (guard.AnswerGuard). A panel can be added by passing
more endpoints or mounting more routes; it gets the same authentication.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from functools import cache, partial

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from qinglong.clock import Clock
from qinglong.errors import (
    BadRequest,
    InvalidInput,
    MethodNotAllowed,
    PayloadTooLarge,
    QinglongError,
    Unauthenticated,
)
from qinglong.web import (
    account_routes,
    backfill_routes,
    dashboard_routes,
    definitions,
    env_routes,
    flow_routes,
    grant_routes,
    limit_routes,
    notify_routes,
    organise_routes,
    repo_routes,
    runs,
    script_routes,
    second_factor_routes,
    sso_routes,
    system,
)
from qinglong.web.auth import authenticate, check_csrf, credentials
from qinglong.web.authorize import authorize, authorize_entity, needs_lookup
from qinglong.web.backend import WebBackend
from qinglong.web.guard import SECURITY_HEADERS, AnswerGuard
from qinglong.web.openapi import build_openapi
from qinglong.web.panel import panel_routes
from qinglong.web.problems import (
    JsonAnswer,
    internal_problem,
    problem_response,
    route_not_found,
)
from qinglong.web.routing import (
    MAX_BODY_BYTES,
    Call,
    Endpoint,
    read_body,
    read_path,
    read_query,
)

__all__ = ["SECURITY_HEADERS", "api_endpoints", "create_web_app", "routes_for"]
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def api_endpoints() -> tuple[Endpoint, ...]:
    """Every route of the API, the OpenAPI document and docs page included."""
    base = (*system.ENDPOINTS, *account_routes.ENDPOINTS, *sso_routes.ENDPOINTS,
            *definitions.ENDPOINTS,
            *backfill_routes.ENDPOINTS, *runs.ENDPOINTS, *notify_routes.ENDPOINTS,
            *env_routes.ENDPOINTS, *flow_routes.ENDPOINTS, *script_routes.ENDPOINTS,
            *repo_routes.ENDPOINTS, *dashboard_routes.ENDPOINTS, *grant_routes.ENDPOINTS,
            *limit_routes.ENDPOINTS,
            *second_factor_routes.ENDPOINTS, *organise_routes.ENDPOINTS)

    @cache
    def document() -> dict[str, object]:
        return build_openapi(everything)

    everything = (*base, system.openapi_document(document), system.docs_endpoint(document))
    return everything


async def _read_limited(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"the body is larger than {MAX_BODY_BYTES} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise PayloadTooLarge(f"the body is larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


class _Dispatcher:
    def __init__(self, backend: WebBackend, clock: Clock, path: str,
                 endpoints: dict[str, Endpoint]) -> None:
        self._backend = backend
        self._clock = clock
        self._path = path
        self._endpoints = endpoints
        self._allowed = tuple(sorted(endpoints))

    async def handle(self, request: Request) -> Response:
        try:
            return await self._answer(request)
        except QinglongError as exc:
            return problem_response(exc)
        except Exception as exc:  # noqa: BLE001 - a problem object, never a traceback
            return internal_problem(exc)

    async def _answer(self, request: Request) -> Response:
        endpoint = self._endpoints.get(request.method)
        found = None
        principal = None
        if endpoint is None or endpoint.level is not None:  # public routes ignore credentials
            found = credentials(request.headers, request.cookies)
            principal = await run_in_threadpool(authenticate, self._backend.accounts, found)
            if principal is None:
                raise Unauthenticated()
        if endpoint is None:
            raise MethodNotAllowed(request.method, self._allowed)
        if principal is not None and endpoint.level is not None:
            await run_in_threadpool(second_factor_routes.check_enrolled, self._backend,
                                    principal, endpoint)
            authorize(endpoint, principal, request.path_params, request.query_params)
            if endpoint.writes:
                check_csrf(principal, found.session if found else None, request.headers)
            if needs_lookup(endpoint, principal):
                await run_in_threadpool(authorize_entity, self._backend, endpoint, principal,
                                        request.path_params)
        path = read_path(request.path_params)
        names = [name for name, _ in request.query_params.multi_items()]
        query = read_query(endpoint, request.query_params, names)
        body = None
        if endpoint.body is not None:
            body = read_body(endpoint.body, request.headers.get("content-type"),
                             await _read_limited(request))
        elif endpoint.writes and (await _read_limited(request)).strip():
            raise InvalidInput("body", "this route takes no body")
        call = Call(backend=self._backend, clock=self._clock, principal=principal,
                    path=path, query=query, body=body,
                    headers=request.headers, client=request.client.host if request.client else None,
                    session_secret=found.session if found else None)
        if endpoint.in_one_transaction:
            action = f"{endpoint.method} {endpoint.path}"
            result = await run_in_threadpool(
                self._backend.unit, action, partial(endpoint.handler, call))
        else:
            result = await run_in_threadpool(endpoint.handler, call)
        if isinstance(result, Response):
            return result
        if result.status == 204:
            return Response(status_code=204, headers=result.headers)
        return JsonAnswer(result.body, status_code=result.status, headers=result.headers)


def routes_for(backend: WebBackend, clock: Clock, endpoints: Iterable[Endpoint]) -> list[BaseRoute]:
    by_path: dict[str, dict[str, Endpoint]] = defaultdict(dict)
    for endpoint in endpoints:
        if endpoint.method in by_path[endpoint.path]:
            raise ValueError(f"two endpoints for {endpoint.method} {endpoint.path}")
        by_path[endpoint.path][endpoint.method] = endpoint
    return [Route(path, _Dispatcher(backend, clock, path, table).handle, name=path,
                  methods=ALL_METHODS)  # the dispatcher answers an unknown method itself
            for path, table in by_path.items()]


def create_web_app(backend: WebBackend, clock: Clock, *,
                   endpoints: tuple[Endpoint, ...] | None = None,
                   extra_routes: Iterable[BaseRoute] = ()) -> Starlette:
    chosen = api_endpoints() if endpoints is None else endpoints

    async def unrouted(request: Request, exc: Exception) -> Response:
        """No route matched: 401 for a stranger, else 404 (or what Starlette said)."""
        try:
            found = credentials(request.headers, request.cookies)
            principal = await run_in_threadpool(authenticate, backend.accounts, found)
            if principal is None:
                raise Unauthenticated()
            status = exc.status_code if isinstance(exc, HTTPException) else 500
            if status == 404:
                raise route_not_found(request.url.path)
            if status == 405:
                raise MethodNotAllowed(request.method, ())
            raise BadRequest(str(exc.detail) if isinstance(exc, HTTPException) else "bad request")
        except QinglongError as error:
            return problem_response(error)
        except Exception as error:  # noqa: BLE001 - a problem object, never a traceback
            return internal_problem(error)

    async def crashed(request: Request, exc: Exception) -> Response:
        del request
        return internal_problem(exc)

    handlers: dict[int | type[Exception], Callable[..., object]] = {
        HTTPException: unrouted, Exception: crashed}
    app = Starlette(routes=[*routes_for(backend, clock, chosen), *panel_routes(backend),
                            *extra_routes],
                    middleware=[Middleware(AnswerGuard)],
                    exception_handlers=handlers)  # type: ignore[arg-type]
    app.router.redirect_slashes = False
    app.state.endpoints = chosen
    return app
