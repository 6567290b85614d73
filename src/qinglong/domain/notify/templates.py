"""Webhook templates: ``{name}`` placeholders in a URL, in header values and in the strings of
a JSON body, filled from the event (and the channel's parameters and secret).

``{{`` and ``}}`` stand for literal braces. In a URL every value is percent-encoded (``:`` and
``@`` stay, as a path allows them), so an event's text can never change the URL's shape; in a
JSON body a value is inserted into a string the template already has, so it is escaped by the
JSON encoder and can never add a field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from qinglong.domain.text import NotJson, strict_json
from qinglong.errors import InvalidInput

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([a-z_][a-z0-9_]{0,63})\}|\{|\}")
SECRET = "secret"  # noqa: S105 - the name of a placeholder, not a password
# What an event fills in (payload.template_values): every template may use these.
EVENT_FIELDS = ("event", "title", "summary", "project", "task", "trigger", "run_id", "status",
                "error", "occurred_at", "delivery_id", "channel")
PARAM_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")
MAX_BODY_TEMPLATE = 16_384


def placeholders(text: str, field: str) -> set[str]:
    """The names ``text`` uses; a lone brace is refused (write ``{{`` or ``}}``)."""
    found: set[str] = set()
    for match in _PLACEHOLDER.finditer(text):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        if match.group(1) is None:
            raise InvalidInput(field, f"has a lone {token!r}; write {token * 2!r} for a literal "
                                      "brace, or {name} for a placeholder")
        found.add(match.group(1))
    return found


def render_text(text: str, values: Mapping[str, str],
                encode: Callable[[str], str] = lambda value: value) -> str:
    def fill(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        name = match.group(1)
        if name is None or name not in values:  # checked when the channel was added
            raise InvalidInput("template", f"has no value for {token}")
        return encode(values[name])

    return _PLACEHOLDER.sub(fill, text)


def url_encode(value: str) -> str:
    return quote(value, safe=":@")


def render_url(template: str, values: Mapping[str, str]) -> str:
    return render_text(template, values, url_encode)


def body_placeholders(body: Any, field: str) -> set[str]:
    """The names used in the strings (keys included) of a JSON body template."""
    if isinstance(body, str):
        return placeholders(body, field)
    if isinstance(body, list):
        return set().union(*(body_placeholders(item, field) for item in body)) if body else set()
    if isinstance(body, dict):
        found: set[str] = set()
        for key, value in body.items():
            found |= placeholders(key, field) | body_placeholders(value, field)
        return found
    return set()


def render_body(body: Any, values: Mapping[str, str]) -> Any:
    """The body template with every string filled in (numbers, booleans and null unchanged)."""
    if isinstance(body, str):
        return render_text(body, values)
    if isinstance(body, list):
        return [render_body(item, values) for item in body]
    if isinstance(body, dict):
        return {render_text(key, values): render_body(value, values) for key, value in body.items()}
    return body


def parse_body_template(text: str, field: str = "body-template") -> Any:
    if len(text) > MAX_BODY_TEMPLATE:
        raise InvalidInput(field, f"is longer than {MAX_BODY_TEMPLATE} characters")
    try:
        body = strict_json(text, field)
    except NotJson as exc:
        raise InvalidInput(field, f"is not JSON ({exc}); placeholders go inside strings, e.g. "
                                  '{"text": "{summary}"}') from None
    if not isinstance(body, dict | list):
        raise InvalidInput(field, "must be a JSON object or array")
    return body


def check_names(used: set[str], allowed: set[str], field: str) -> None:
    unknown = sorted(used - allowed)
    if unknown:
        raise InvalidInput(field, f"uses unknown placeholder {{{unknown[0]}}}; use "
                                  + ", ".join("{" + name + "}" for name in sorted(allowed)))
