"""Every error of the HTTP API as one JSON problem (RFC 9457, ``application/problem+json``):
``type``, ``title``, ``status``, ``detail`` and ``code`` (our stable error code), plus
``field`` for bad input. The statuses come from ``service.errors.ERROR_TABLE`` and, for what
only HTTP has (authentication, routes, bodies), from the table here."""

from __future__ import annotations

import logging

from starlette.responses import JSONResponse

from qinglong.errors import InvalidInput, NotFound, QinglongError
from qinglong.service.accounts import Forbidden, RateLimited, Unauthenticated
from qinglong.service.errors import http_status_for, problem

PROBLEM_MEDIA = "application/problem+json"
log = logging.getLogger(__name__)


class BadRequest(QinglongError):
    """The request cannot be read (its JSON, its content type or its form)."""

    code = "QL_BAD_REQUEST"


class MethodNotAllowed(QinglongError):
    """This route does not answer this method."""

    code = "QL_METHOD_NOT_ALLOWED"

    def __init__(self, method: str, allowed: tuple[str, ...]) -> None:
        self.allowed = allowed
        super().__init__(f"{method} is not allowed here; allowed: {', '.join(allowed)}")


class PayloadTooLarge(QinglongError):
    """The request body is too large."""

    code = "QL_PAYLOAD_TOO_LARGE"


class UnsupportedMediaType(QinglongError):
    """The request body must be JSON (Content-Type: application/json)."""

    code = "QL_UNSUPPORTED_MEDIA_TYPE"


class InternalError(QinglongError):
    """Something went wrong inside the server; it was logged."""

    code = "QL_INTERNAL"


WEB_STATUS: tuple[tuple[type[QinglongError], int], ...] = (
    (Unauthenticated, 401),
    (Forbidden, 403),
    (RateLimited, 429),
    (BadRequest, 400),
    (MethodNotAllowed, 405),
    (PayloadTooLarge, 413),
    (UnsupportedMediaType, 415),
)

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
    for kind, status in WEB_STATUS:
        if isinstance(exc, kind):
            return status
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
