"""Every error of the HTTP API as one JSON problem (RFC 9457, ``application/problem+json``):
``type``, ``title``, ``status``, ``detail`` and ``code`` (our stable error code), plus
``field`` for bad input. The statuses come from ``service.errors.ERROR_TABLE`` and, for what
only HTTP has (authentication, routes, bodies), from the table here."""

from __future__ import annotations

import logging

from starlette.responses import JSONResponse

from qinglong.errors import (
    InternalError,
    InvalidInput,
    MethodNotAllowed,
    NotFound,
    QinglongError,
    RateLimited,
    Unauthenticated,
)
from qinglong.service.errors import http_status_for, problem

PROBLEM_MEDIA = "application/problem+json"
log = logging.getLogger(__name__)


# Domain field names as the API's body and query fields name them.
FIELD_NAMES = {
    "working-directory": "working_directory",
    "overlap-queue-limit": "overlap_queue_limit",
    "request-id": "request_id",
    "timeout": "timeout_ms",
    "max-attempts": "retry.max_attempts",
    "retry-backoff": "retry.backoff_ms",
    "retry-max-backoff": "retry.max_backoff_ms",
    "retry-on-exit": "retry.on_exit_codes",
    "retry-on-timeout": "retry.on_timeout",
    "command.file": "command.argv",
    "command.args": "command.argv",
    "env": "environment",
    "since": "since",
}


def field_name(field: str) -> str:
    """``command.args[2]`` -> ``command.argv``; ``environment.TOKEN`` stays."""
    return FIELD_NAMES.get(field.split("[", 1)[0], field)


def status_for(exc: QinglongError) -> int:
    return http_status_for(exc)


def problem_body(exc: QinglongError) -> dict[str, object]:
    field = field_name(exc.field) if isinstance(exc, InvalidInput) else None
    body = problem(exc, field=field)
    body["status"] = status_for(exc)
    return body


def problem_response(exc: QinglongError) -> JSONResponse:
    body = problem_body(exc)
    headers: dict[str, str] = {"Cache-Control": "no-store"}
    if isinstance(exc, Unauthenticated):
        headers["WWW-Authenticate"] = 'Bearer realm="qinglong"'
    if isinstance(exc, RateLimited):
        headers["Retry-After"] = str(exc.retry_after_s)
    if isinstance(exc, MethodNotAllowed):
        headers["Allow"] = ", ".join(exc.allowed)
    status = body["status"]
    assert isinstance(status, int)
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_MEDIA)


def internal_problem(exc: BaseException) -> JSONResponse:
    """An unexpected exception: logged here with its traceback, never sent to the client."""
    log.error("internal error answering a request", exc_info=exc)
    return problem_response(InternalError())


def route_not_found(path: str) -> NotFound:
    return NotFound("route", path[:200])
