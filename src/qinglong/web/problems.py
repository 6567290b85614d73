"""Every error of the HTTP API as one JSON problem (RFC 9457, ``application/problem+json``):
``type``, ``title``, ``status``, ``detail`` and ``code`` (our stable error code), plus
``field`` for bad input. The statuses come from ``service.errors.ERROR_TABLE`` and, for what
only HTTP has (authentication, routes, bodies), from the table here."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from starlette.responses import JSONResponse

from qinglong.domain.text import LONE_SURROGATE
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
from qinglong.service.views.base import jsonable

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


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _finite(inner) for key, inner in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(inner) for inner in value]
    return value


def json_bytes(content: Any) -> bytes:
    """``content`` as compact UTF-8 JSON, whatever text a stored row holds: a lone surrogate
    (stored by an older version) is written as its ``\\uXXXX`` escape, which is valid JSON
    for the same string, and a NaN or infinity as a string, so no stored value can make an
    answer fail."""
    try:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:
        text = json.dumps(_finite(content), ensure_ascii=False, allow_nan=False,
                          separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


class JsonAnswer(JSONResponse):
    """A JSON answer rendered by ``json_bytes``: the one place a reply's body (a view, a list
    of views, or plain JSON) becomes JSON, each view as its JSON form."""

    def render(self, content: Any) -> bytes:
        return json_bytes(jsonable(content))


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


def problem_response(exc: QinglongError) -> JsonAnswer:
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
    return JsonAnswer(body, status_code=status, headers=headers, media_type=PROBLEM_MEDIA)


def internal_problem(exc: BaseException) -> JsonAnswer:
    """An unexpected exception: logged here with its traceback, never sent to the client."""
    log.error("internal error answering a request", exc_info=exc)
    return problem_response(InternalError())


def route_not_found(path: str) -> NotFound:
    return NotFound("route", path[:200])
