"""The route table's parts: what an endpoint is (method, path, who may call it, its query,
body and response), what a handler gets (``Call``) and gives back (``Reply``), and the strict
readers of path parameters, query strings and JSON bodies. The app, the OpenAPI document and
the tests all read the same table.

Everything a request carries is checked here before a handler runs: text must be valid
(no lone surrogates, no control characters in parameters), JSON must nest at most
``MAX_JSON_DEPTH`` levels with numbers a database can hold, numbers and instants must lie in
their range, and a path parameter -- or a query parameter of the same name -- must match the
rule of ``IDENTIFIERS`` (which the OpenAPI document states as its pattern).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.datastructures import Headers
from starlette.responses import Response

from qinglong.clock import Clock
from qinglong.domain import identifiers as ids
from qinglong.domain.notify.channels import NAME as CHANNEL_NAME
from qinglong.domain.notify.channels import NAME_RULE as CHANNEL_NAME_RULE
from qinglong.domain.organise import FILTER_NAME, FILTER_NAME_RULE, LABEL, LABEL_RULE
from qinglong.domain.project_env import VARIABLE_NAME, VARIABLE_NAME_RULE
from qinglong.domain.text import MAX_JSON_INT, MIN_JSON_INT, NotJson, check_text, strict_json
from qinglong.errors import BadRequest, InvalidInput, PayloadTooLarge, UnsupportedMediaType
from qinglong.service.access import Reach, visible
from qinglong.service.accounts import USERNAME_RULE, Level, Principal
from qinglong.service.logins import USERNAME
from qinglong.web.backend import WebBackend
from qinglong.web.field_rules import NO_CONTROLS
from qinglong.web.requests import Request

MAX_BODY_BYTES = 1024 * 1024
MAX_PARAMETER_CHARS = 1024
MAX_INSTANT_MS = 253_402_300_799_999
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(9998, 12, 31)  # a day and the next are instants
_WHOLE = re.compile(r"-?[0-9]{1,19}")
_DIGITS = re.compile(r"[0-9]{1,19}")
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_QUERY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # a query name a problem's field may repeat


@dataclass(frozen=True, slots=True)
class Identifier:
    """The rule of a path parameter (and of a query parameter of the same name)."""

    pattern: re.Pattern[str]
    rule: str
    description: str

    def read(self, name: str, text: str) -> str:
        if not self.pattern.fullmatch(text):
            raise InvalidInput(name, self.rule)
        return text


IDENTIFIERS: dict[str, Identifier] = {
    "project": Identifier(ids.PROJECT_ID, ids.PROJECT_ID_RULE, "Project id"),
    "task": Identifier(ids.ENTITY_ID, ids.ENTITY_ID_RULE, "Task id"),
    "trigger": Identifier(ids.ENTITY_ID, ids.ENTITY_ID_RULE, "Trigger id"),
    "run": Identifier(ids.RUN_REF, ids.RUN_REF_RULE,
                      "Run id, or a unique prefix of 8 or more characters"),
    "flow": Identifier(ids.ENTITY_ID, ids.ENTITY_ID_RULE, "Flow id"),
    "repo": Identifier(ids.ENTITY_ID, ids.ENTITY_ID_RULE, "Git subscription name"),
    "flow_run": Identifier(ids.RUN_REF, ids.RUN_REF_RULE,
                           "Flow run id, or a unique prefix of 8 or more characters"),
    "token": Identifier(ids.TOKEN_ID, ids.TOKEN_ID_RULE, "Token id (the 16 characters after "
                                                         "qlt_)"),
    "username": Identifier(USERNAME, USERNAME_RULE, "User name"),
    "channel": Identifier(CHANNEL_NAME, CHANNEL_NAME_RULE, "Notification channel name"),
    "delivery": Identifier(ids.UUID_REF, ids.DELIVERY_REF_RULE,
                           "Delivery id, or the start of it"),
    "variable": Identifier(VARIABLE_NAME, VARIABLE_NAME_RULE, "Environment entry name"),
    "filter": Identifier(FILTER_NAME, FILTER_NAME_RULE, "Saved filter name"),
}
# A query parameter with a rule of its own (no path parameter has its name).
LABEL_FILTER = Identifier(LABEL, LABEL_RULE, "A label of a task or trigger (e.g. team:payments)")


def _qualified(entity: re.Pattern[str]) -> re.Pattern[str]:
    """``entity``, or ``PROJECT/entity`` (spaces around the slash allowed): how the panel and
    the CLI show a task or a trigger."""
    project, body = ids.PROJECT_ID.pattern.strip("^$"), entity.pattern.strip("^$")
    return re.compile(rf"^(?:{project} */ *)?{body}$")


# Query parameters that name a task or a trigger also take it qualified by its project.
QUALIFIED: dict[str, Identifier] = {
    name: Identifier(_qualified(ids.ENTITY_ID), ids.ENTITY_ID_RULE,
                     f"{IDENTIFIERS[name].description}, or PROJECT/ID")
    for name in ("task", "trigger")
}


def read_path(params: Mapping[str, str]) -> dict[str, str]:
    """The path parameters of a matched route, each checked by its identifier rule."""
    found: dict[str, str] = {}
    for name, value in params.items():
        text = check_text(str(value), name, max_length=MAX_PARAMETER_CHARS, controls=False)
        rule = IDENTIFIERS.get(name)
        found[name] = rule.read(name, text) if rule is not None else text
    return found


@dataclass(frozen=True, slots=True)
class Query:
    """One query parameter: ``int``, ``str``, ``bool``, ``instant`` (RFC 3339 or epoch
    milliseconds, read as epoch milliseconds), ``date`` (YYYY-MM-DD) or ``choice``."""

    name: str
    kind: str
    description: str
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    default: object = None
    required: bool = False
    rule: Identifier | None = None  # a ``str``'s own rule (else IDENTIFIERS' of its name)

    @property
    def bounds(self) -> tuple[int, int]:
        """An ``int``'s range: the declared one, else what a database integer holds."""
        return (MIN_JSON_INT if self.minimum is None else self.minimum,
                MAX_JSON_INT if self.maximum is None else self.maximum)

    @property
    def identifier(self) -> Identifier | None:
        if self.kind == "qualified":
            return QUALIFIED[self.name]
        if self.kind == "str" and self.rule is not None:
            return self.rule
        return IDENTIFIERS.get(self.name) if self.kind == "str" else None

    def schema(self) -> dict[str, object]:
        if self.kind == "int":
            low, high = self.bounds
            schema: dict[str, object] = {"type": "integer", "minimum": low, "maximum": high}
        elif self.kind == "bool":
            schema = {"type": "boolean"}
        elif self.kind == "choice":
            schema = {"type": "string", "enum": list(self.choices)}
        elif self.kind == "instant":
            schema = {"oneOf": [{"type": "string", "format": "date-time"},
                                {"type": "integer", "minimum": 0, "maximum": MAX_INSTANT_MS}]}
        elif self.kind == "date":
            schema = {"type": "string", "format": "date",
                      "description": f"{FIRST_DAY.isoformat()} to {LAST_DAY.isoformat()}"}
        elif self.identifier is not None:
            schema = {"type": "string", "pattern": self.identifier.pattern.pattern}
        else:
            schema = {"type": "string", "maxLength": MAX_PARAMETER_CHARS,
                      "pattern": NO_CONTROLS}
        if self.default is not None:
            schema["default"] = self.default
        return schema

    def read(self, text: str) -> object:
        text = check_text(text, self.name, controls=False)
        if self.kind == "int":
            if not _WHOLE.fullmatch(text):
                raise InvalidInput(self.name, "must be a whole number")
            value = int(text)
            low, high = self.bounds
            if not low <= value <= high:
                raise InvalidInput(self.name, f"must be between {low} and {high}")
            return value
        if self.kind == "bool":
            if text not in ("true", "false", "1", "0"):
                raise InvalidInput(self.name, "must be true or false")
            return text in ("true", "1")
        if self.kind == "choice":
            if text not in self.choices:
                raise InvalidInput(self.name, "must be one of " + ", ".join(self.choices))
            return text
        if self.kind == "instant":
            return read_instant(text, self.name)
        if len(text) > MAX_PARAMETER_CHARS:
            raise InvalidInput(self.name, f"is longer than {MAX_PARAMETER_CHARS} characters")
        if self.kind == "date":
            return read_day(text, self.name)
        if self.identifier is not None:
            return self.identifier.read(self.name, text)
        return text


def read_day(text: str, name: str) -> str:
    """A calendar day (YYYY-MM-DD) within the range a day's instants can have, as given."""
    rule = (f"must be a date such as 2026-12-01, from {FIRST_DAY.isoformat()} to "
            f"{LAST_DAY.isoformat()}")
    if not _DAY.fullmatch(text):
        raise InvalidInput(name, rule)
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise InvalidInput(name, rule) from None
    if not FIRST_DAY <= day <= LAST_DAY:
        raise InvalidInput(name, rule)
    return text


def read_instant(value: object, name: str) -> int:
    """RFC 3339 with an offset (or Z), or epoch milliseconds, as epoch milliseconds."""
    if isinstance(value, int) and not isinstance(value, bool):
        millis = value
    elif isinstance(value, str) and _DIGITS.fullmatch(value):
        millis = int(value)
    elif isinstance(value, str):
        try:
            if len(value) > 64:
                raise ValueError(value)
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidInput(name, "must be an RFC 3339 time (e.g. 2026-12-01T08:00:00Z) or "
                                     "epoch milliseconds") from None
        if parsed.tzinfo is None:
            raise InvalidInput(name, "needs a UTC offset or Z")
        millis = (parsed - EPOCH) // timedelta(milliseconds=1)  # integer arithmetic
    else:
        raise InvalidInput(name, "must be an RFC 3339 time or epoch milliseconds")
    if not 0 <= millis <= MAX_INSTANT_MS:
        raise InvalidInput(name, "must lie between 1970 and 9999")
    return millis


@dataclass(slots=True)
class Reply:
    body: object
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class Call:
    """What a handler gets: the backend, who asks, and the request's validated parts."""

    backend: WebBackend
    clock: Clock
    principal: Principal | None
    path: dict[str, str]
    query: dict[str, Any]
    body: Any  # the endpoint's request model (or None)
    headers: Headers
    client: str | None
    session_secret: str | None = None

    @property
    def who(self) -> Principal:
        assert self.principal is not None
        return self.principal

    @property
    def visible(self) -> frozenset[str] | None:
        """The projects the caller may read (None: every project): what a listing keeps."""
        return visible(self.who)

    def audit(self, action: str, *, project: str | None = None, target: str | None = None,
              detail: dict[str, object] | None = None) -> None:
        """Record what this call did, and who asked: in the call's unit of work, so the row
        commits with the change (``Endpoint.atomic``)."""
        self.backend.accounts.audit(self.who, action, project=project, target=target,
                                    detail=detail, client=self.client)


Handler = Callable[[Call], "Reply | Response"]
_PATH_REACH = (("project", Reach.PROJECT), ("run", Reach.RUN), ("flow_run", Reach.FLOW_RUN))


@dataclass(frozen=True, slots=True)
class Endpoint:
    method: str
    path: str  # /api/v1/projects/{project}
    handler: Handler
    summary: str
    tag: str
    level: Level | None  # None: no authentication (only /livez, /readyz and the login)
    body: type[Request] | None = None
    response: type[BaseModel] | None = None
    many: bool = False  # a JSON array of ``response``
    status: int = 200
    also: tuple[int, ...] = ()  # other success statuses (201 Created, 204 No Content)
    query: tuple[Query, ...] = ()
    media: str = "application/json"  # or text/plain, text/event-stream (one of ``medias``)
    medias: tuple[str, ...] = ()
    description: str = ""
    # a write runs as one unit of work: what the handler changes and its audit row commit
    # together or not at all (a conflict runs the handler again). False only for a write that
    # must keep what it wrote when it refuses (the login's failure count), that waits on
    # something outside the database (a test notification) or that commits in steps (backfill)
    atomic: bool = True
    # what the route acts on, for per-project roles (service.access.Reach); None: derived
    # from the path ({project}, {run}, {flow_run}), else the whole installation
    reach: Reach | None = None

    @property
    def access(self) -> Reach:
        if self.level is None:
            return Reach.PUBLIC
        if self.reach is not None:
            return self.reach
        for name, reach in _PATH_REACH:
            if "{" + name + "}" in self.path:
                return reach
        return Reach.GLOBAL

    @property
    def writes(self) -> bool:
        return self.method not in ("GET", "HEAD", "OPTIONS")

    @property
    def in_one_transaction(self) -> bool:
        return self.writes and self.atomic


def read_query(endpoint: Endpoint, params: Mapping[str, str], names: list[str]) -> dict[str, Any]:
    known = {q.name: q for q in endpoint.query}
    for name in names:
        if name not in known:
            hint = f" (known: {', '.join(sorted(known))})" if known else ""
            if not _QUERY_NAME.fullmatch(name):  # no name, or none to repeat as a field
                raise InvalidInput("query", "has a parameter this route does not take" + hint)
            raise InvalidInput(name, "is not a query parameter of this route" + hint)
        if names.count(name) > 1:
            raise InvalidInput(name, "is given more than once")
    for q in endpoint.query:
        if q.required and q.name not in params:
            raise InvalidInput(q.name, "is required")
    return {q.name: q.read(params[q.name]) if q.name in params else q.default
            for q in endpoint.query}


def whole_numbers(value: Any) -> Any:
    """``value`` with each number of no fraction (``262.0``, ``1e3``) within what a database
    integer holds as the integer it equals: JSON does not tell them apart, nor does the
    document's ``integer`` (JSON Schema's), and the request models are strict."""
    if isinstance(value, float) and value.is_integer() and MIN_JSON_INT <= value <= MAX_JSON_INT:
        return int(value)
    if isinstance(value, dict):
        return {key: whole_numbers(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [whole_numbers(inner) for inner in value]
    return value


def read_body(model: type[Request], content_type: str | None, raw: bytes) -> Request:
    """The body as ``model``: JSON (text.strict_json: valid text, bounded nesting and
    numbers), an object, every field by the model's rules."""
    if len(raw) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"the body is larger than {MAX_BODY_BYTES} bytes")
    if not raw.strip():
        data: object = {}
    else:
        media = (content_type or "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            raise UnsupportedMediaType(
                f"send the body as JSON with Content-Type: application/json (not {media or 'none'})")
        try:
            data = whole_numbers(strict_json(raw))
        except NotJson as exc:
            raise BadRequest(f"the body is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InvalidInput("body", "must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc) from None


def validation_error(exc: ValidationError) -> InvalidInput:
    """The first problem pydantic found, named by its field path (``retry.max_attempts``)."""
    first = exc.errors()[0]
    loc = list(first["loc"])
    if len(loc) > 1 and loc[0] == "command" and loc[1] in ("shell", "argv"):
        del loc[1]  # the tag of the discriminated union, not a field
    location = ".".join(str(part) for part in loc) or "body"
    kind = first["type"]
    if kind == "extra_forbidden":
        return InvalidInput(location, "is not a field of this request")
    if kind == "missing":
        return InvalidInput(location, "is required")
    return InvalidInput(location, first["msg"].removeprefix("Value error, "))
