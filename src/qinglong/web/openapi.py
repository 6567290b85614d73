"""The OpenAPI 3.1 document, built from the route table: every route with its parameters,
its request body and its responses (the success shape and the problem shape of every error
it can give), the schemas generated from the request models (``web.requests``) and the
service's views (``service.views``), the same models the answers are serialized from.
Every pattern and bound the server checks is stated from the definition it checks with: path
parameters from ``routing.IDENTIFIERS``, query parameters from their ``Query``, body fields
from the models."""

from __future__ import annotations

import re
from typing import Any

from pydantic.json_schema import models_json_schema

from qinglong import __version__
from qinglong.service.views.system import EndEventData, LogEventData, Problem
from qinglong.web.requests import LoginRequest
from qinglong.web.routing import IDENTIFIERS, Endpoint

REF = "#/components/schemas/{model}"
_PATH_PARAM = re.compile(r"\{([a-z_]+)\}")
PROBLEM_MEDIA = "application/problem+json"
EVENT_STREAM = "text/event-stream"
EVENTS: dict[str, type[Any]] = {"log": LogEventData, "end": EndEventData, "error": Problem}
EVENTS_TEXT = ("Server-sent events: `log` events (data: {\"text\": ...}) while the output "
               "grows, then `end` (data: {\"status\": ...}) when the Run has ended, or `error` "
               "(data: a Problem); comment lines keep the stream alive.")


def _ref(model: type[Any]) -> dict[str, object]:
    return {"$ref": REF.format(model=model.__name__)}


def _problem(description: str) -> dict[str, object]:
    return {"description": description,
            "content": {PROBLEM_MEDIA: {"schema": _ref(Problem)}}}


def _responses(endpoint: Endpoint) -> dict[str, object]:
    responses: dict[str, object] = {}
    for status in (endpoint.status, *endpoint.also):
        if status == 204:
            responses["204"] = {"description": "Done (no content)"}
        elif 300 <= status < 400:
            responses[str(status)] = {"description": "A redirect (to the Location header)"}
        elif endpoint.medias:
            responses[str(status)] = {"description": "OK", "content": {
                media: _media(media) for media in endpoint.medias}}
        elif endpoint.response is not None:
            schema: dict[str, object] = _ref(endpoint.response)
            if endpoint.many:
                schema = {"type": "array", "items": schema}
            responses[str(status)] = {"description": "Created" if status == 201 else "OK",
                                      "content": {"application/json": {"schema": schema}}}
    if endpoint.level is not None:
        responses["401"] = _problem("Not authenticated (no, a wrong or an expired token or "
                                    "session)")
        responses["403"] = _problem("The role or token scope is not enough, or a session "
                                    "write without its CSRF token")
    elif endpoint.body is LoginRequest:
        responses["401"] = _problem("Wrong user name or password")
        responses["429"] = _problem("Too many failed logins (see Retry-After)")
    elif endpoint.path.startswith("/api/v1/sso/"):
        responses["401"] = _problem("Single sign-on refused the login (the detail says why)")
        responses["502"] = _problem("The single sign-on provider failed")
        if endpoint.path == "/api/v1/sso/login":
            responses["429"] = _problem("Too many logins started from this address "
                                        "(see Retry-After)")
    if endpoint.path.startswith("/api/"):
        responses["404"] = _problem("A record (or the route) does not exist")
        responses["422"] = _problem("An input value breaks a rule (field names it)")
    if endpoint.body is not None:
        responses["400"] = _problem("The body is not JSON")
        responses["413"] = _problem("The body is larger than 1 MiB")
        responses["415"] = _problem("The body is not sent as application/json")
    if endpoint.writes and endpoint.path.startswith("/api/"):
        responses["409"] = _problem("The stored state does not allow this")
    responses["503"] = _problem("The database is unavailable")
    return responses


def _media(media: str) -> dict[str, object]:
    """A success answer that is not one of the response models."""
    if media == "application/json":  # the OpenAPI document itself
        return {"schema": {"type": "object", "required": ["openapi", "info", "paths"],
                           "description": "An OpenAPI 3.1 document"}}
    if media == EVENT_STREAM:  # before OpenAPI 3.2 the schema describes one event
        return {"schema": {
            "type": "object", "description": EVENTS_TEXT, "required": ["event", "data"],
            "properties": {"event": {"type": "string", "enum": list(EVENTS)},
                           "data": {"type": "string", "contentMediaType": "application/json"}},
            "oneOf": [{"properties": {"event": {"const": kind},
                                      "data": {"contentSchema": _ref(model)}}}
                      for kind, model in EVENTS.items()]}}
    return {"schema": {"type": "string"}}


def path_parameter(name: str) -> dict[str, object]:
    rule = IDENTIFIERS[name]
    return {"name": name, "in": "path", "required": True, "description": rule.description,
            "schema": {"type": "string", "pattern": rule.pattern.pattern}}


def operation_id(endpoint: Endpoint) -> str:
    """``post_projects_project_tasks_task_revisions`` (unique per method and path)."""
    words = [w.strip("{}") for w in endpoint.path.removeprefix("/api/v1").split("/") if w]
    return "_".join([endpoint.method.lower(), *(w.replace(".", "_") for w in words)])


def _operation(endpoint: Endpoint) -> dict[str, object]:
    operation: dict[str, object] = {
        "operationId": operation_id(endpoint),
        "summary": endpoint.summary,
        "tags": [endpoint.tag],
        "responses": _responses(endpoint),
    }
    if endpoint.description:
        operation["description"] = endpoint.description
    parameters: list[dict[str, object]] = [
        path_parameter(name) for name in _PATH_PARAM.findall(endpoint.path)]
    parameters += [{"name": q.name, "in": "query", "required": q.required,
                    "description": q.description, "schema": q.schema()}
                   for q in endpoint.query]
    if parameters:
        operation["parameters"] = parameters
    if endpoint.body is not None:
        required = any(f.is_required() for f in endpoint.body.model_fields.values())
        operation["requestBody"] = {"required": required, "content": {
            "application/json": {"schema": _ref(endpoint.body)}}}
    if endpoint.level is None:
        operation["security"] = []
    else:
        operation["x-qinglong-scope"] = endpoint.level.name.lower()
        # what the scope is needed on (docs/security.md, service/access.py): the project in
        # the path, the project of the Run or flow run, a listing's projects, every project
        # (global), or nothing (self: anyone authenticated)
        operation["x-qinglong-reach"] = endpoint.access.value
    return operation


def build_openapi(endpoints: tuple[Endpoint, ...]) -> dict[str, object]:
    bodies = {e.body for e in endpoints if e.body is not None}
    answers = {e.response for e in endpoints if e.response is not None} | set(EVENTS.values())
    # requests as they are read, answers as they are written (``from_`` is sent as ``from``)
    _, top = models_json_schema(
        [*((model, "validation") for model in sorted(bodies, key=lambda m: m.__name__)),
         *((model, "serialization") for model in sorted(answers, key=lambda m: m.__name__))],
        ref_template=REF)
    paths: dict[str, dict[str, object]] = {}
    for endpoint in endpoints:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(endpoint)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "qinglong HTTP API",
            "version": __version__,
            "description": (
                "Projects, tasks, triggers and Runs of qinglong, with the same JSON shapes as "
                "`ql ... --json`. Authenticate with an API token (Authorization: Bearer "
                "qlt_...) or a session cookie from POST /api/v1/session (writes then need its "
                "X-CSRF-Token). Every error is a problem object (application/problem+json) "
                "with a stable code. Task environment values and notification channel "
                "secrets are write-only."),
        },
        "servers": [{"url": "/"}],
        "security": [{"token": []}, {"session": []}],
        "tags": [{"name": name} for name in
                 ("projects", "tasks", "triggers", "runs", "stats", "notify", "accounts",
                  "system")],
        "paths": paths,
        "components": {
            "schemas": top.get("$defs", {}),
            "securitySchemes": {
                "token": {"type": "http", "scheme": "bearer",
                          "description": "An API token: qlt_<id>_<secret> (`ql token create`)"},
                "session": {"type": "apiKey", "in": "cookie", "name": "ql_session",
                            "description": "The session cookie of POST /api/v1/session"},
            },
        },
    }
