"""Channels: where notifications go, and how hard to try.

Four kinds: ``webhook`` (a JSON POST in our versioned shape, HMAC-signed with the channel's
secret), ``email`` (SMTP, the secret is the password), ``template`` (any HTTP endpoint: a
URL template and a JSON body template filled from the event) and ``service`` (a chat or push
service qinglong knows: DingTalk, Feishu, WeCom, ServerChan, PushPlus, ntfy, Gotify, Slack,
Discord; ``services``). The presets ``telegram`` and ``bark`` are templates written for those
services (``presets``). A channel's secret is kept apart from its spec: it is written, used
to send, and never shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from qinglong.domain.notify import templates
from qinglong.domain.notify.services import ServiceTarget, secret_needed
from qinglong.domain.notify.urls import check_http_url
from qinglong.errors import InvalidInput, RecordCorrupt

NAME = re.compile(r"^[a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?$")
NAME_RULE = ("must be 1-64 lowercase letters, digits, '-' or '_', starting and ending with a "
             "letter or digit")
HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")
EMAIL = re.compile(r"^[^@\s<>,;\"]{1,64}@[A-Za-z0-9.-]{1,253}$")
HOST = re.compile(r"^[A-Za-z0-9.:\[\]-]{1,253}$")
MAX_HEADERS = 16
MAX_RECIPIENTS = 20
MAX_PARAMS = 16
MAX_SECRET = 4096
MAX_PORT = 65535
# Headers the sender sets itself; a channel may not override them.
RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection",
                              "idempotency-key", "x-qinglong-event", "x-qinglong-delivery",
                              "x-qinglong-timestamp", "x-qinglong-signature"})

MIN_TIMEOUT_MS, MAX_TIMEOUT_MS, DEFAULT_TIMEOUT_MS = 1_000, 60_000, 10_000
MIN_ATTEMPTS, MAX_ATTEMPTS, DEFAULT_ATTEMPTS = 1, 100, 12
MIN_BACKOFF_MS, MAX_BACKOFF_MS = 100, 86_400_000
DEFAULT_BACKOFF_MS, DEFAULT_MAX_BACKOFF_MS = 10_000, 600_000
JITTER = (0.8, 1.2)


class ChannelKind(StrEnum):
    WEBHOOK = "webhook"
    EMAIL = "email"
    TEMPLATE = "template"
    SERVICE = "service"


class SmtpSecurity(StrEnum):
    STARTTLS = "starttls"  # plain connection upgraded with STARTTLS (port 587)
    TLS = "tls"  # TLS from the first byte (port 465)
    NONE = "none"  # no encryption (a local relay; port 25)


DEFAULT_PORTS = {SmtpSecurity.STARTTLS: 587, SmtpSecurity.TLS: 465, SmtpSecurity.NONE: 25}


def check_name(name: str, field: str = "channel") -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidInput(field, NAME_RULE)
    return name


def check_email(address: str, field: str) -> str:
    if not isinstance(address, str) or len(address) > 254 or not EMAIL.fullmatch(address):
        raise InvalidInput(field, f"{address!r} is not an email address (name@example.com)")
    return address


def check_secret(secret: str | None, field: str = "secret") -> str | None:
    if secret is None:
        return None
    if not secret or len(secret) > MAX_SECRET or "\n" in secret or "\r" in secret:
        raise InvalidInput(field, f"must be 1-{MAX_SECRET} characters on one line")
    return secret


def _bounded(value: int, low: int, high: int, field: str, unit: str = "") -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidInput(field, f"must be between {low}{unit} and {high}{unit}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Attempts in all, and the wait after the n-th failed one: ``min(max_backoff, backoff *
    2^(n-1))`` times a random factor in 0.8-1.2."""

    max_attempts: int = DEFAULT_ATTEMPTS
    backoff_ms: int = DEFAULT_BACKOFF_MS
    max_backoff_ms: int = DEFAULT_MAX_BACKOFF_MS

    def __post_init__(self) -> None:
        _bounded(self.max_attempts, MIN_ATTEMPTS, MAX_ATTEMPTS, "max-attempts")
        _bounded(self.backoff_ms, MIN_BACKOFF_MS, MAX_BACKOFF_MS, "retry-backoff", " ms")
        _bounded(self.max_backoff_ms, MIN_BACKOFF_MS, MAX_BACKOFF_MS, "retry-max-backoff", " ms")
        if self.max_backoff_ms < self.backoff_ms:
            raise InvalidInput("retry-max-backoff", "must not be shorter than --retry-backoff")

    def delay_ms(self, failed_attempts: int, jitter: float) -> int:
        exponent = min(max(failed_attempts, 1) - 1, 40)
        return int(min(self.max_backoff_ms, self.backoff_ms * 2 ** exponent) * jitter)


def _check_headers(headers: tuple[tuple[str, str], ...], field: str) -> None:
    if len(headers) > MAX_HEADERS:
        raise InvalidInput(field, f"at most {MAX_HEADERS} headers")
    for name, value in headers:
        if not HEADER_NAME.fullmatch(name):
            raise InvalidInput(field, f"{name!r} is not a header name")
        if name.lower() in RESERVED_HEADERS:
            raise InvalidInput(field, f"{name} is set by qinglong itself")
        if any(c in value for c in "\r\n\0") or len(value) > 1024:
            raise InvalidInput(field, f"the value of {name} must be one line of at most 1024 "
                                      "characters")


def parse_header(text: str, field: str = "header") -> tuple[str, str]:
    """``Name: value`` (or ``Name=value``)."""
    for separator in (":", "="):
        name, found, value = text.partition(separator)
        if found and name.strip():
            return name.strip(), value.strip()
    raise InvalidInput(field, f"{text!r} is not NAME: VALUE")


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookTarget:
    url: str
    headers: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        check_http_url(self.url)
        _check_headers(self.headers, "header")

    @property
    def shown(self) -> str:
        return self.url


@dataclass(frozen=True, slots=True, kw_only=True)
class EmailTarget:
    host: str
    sender: str
    recipients: tuple[str, ...]
    port: int | None = None  # None: the default of the security mode
    security: SmtpSecurity = SmtpSecurity.STARTTLS
    username: str | None = None

    def __post_init__(self) -> None:
        if not HOST.fullmatch(self.host or ""):
            raise InvalidInput("smtp-host", f"{self.host!r} is not a host name or address")
        if self.port is not None:
            _bounded(self.port, 1, MAX_PORT, "smtp-port")
        check_email(self.sender, "from")
        if not 1 <= len(self.recipients) <= MAX_RECIPIENTS:
            raise InvalidInput("to", f"name 1-{MAX_RECIPIENTS} recipients")
        for recipient in self.recipients:
            check_email(recipient, "to")
        if self.username is not None and not 1 <= len(self.username) <= 256:
            raise InvalidInput("smtp-user", "must be 1-256 characters")

    @property
    def effective_port(self) -> int:
        return self.port if self.port is not None else DEFAULT_PORTS[self.security]

    @property
    def shown(self) -> str:
        return (f"smtp://{self.host}:{self.effective_port} ({self.security.value}) -> "
                + ", ".join(self.recipients))


class HttpMethod(StrEnum):
    POST = "POST"
    PUT = "PUT"
    GET = "GET"


@dataclass(frozen=True, slots=True, kw_only=True)
class TemplateTarget:
    """An HTTP request filled from the event: ``url`` and header values are text templates,
    ``body`` a JSON template (None: no body)."""

    url: str
    method: HttpMethod = HttpMethod.POST
    body: Any = None
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    params: tuple[tuple[str, str], ...] = ()
    preset: str | None = None

    def __post_init__(self) -> None:
        if len(self.params) > MAX_PARAMS:
            raise InvalidInput("param", f"at most {MAX_PARAMS} parameters")
        names = set()
        for name, value in self.params:
            if not templates.PARAM_NAME.fullmatch(name) or name in templates.EVENT_FIELDS \
                    or name == templates.SECRET:
                raise InvalidInput("param", f"{name!r} is not a parameter name (lowercase, "
                                            "not one of the event's fields)")
            if len(value) > 1024 or "\n" in value:
                raise InvalidInput("param", f"the value of {name} must be one line of at most "
                                            "1024 characters")
            names.add(name)
        allowed = set(templates.EVENT_FIELDS) | names | {templates.SECRET}
        templates.check_names(templates.placeholders(self.url, "url"), allowed, "url")
        _check_headers(self.headers, "header")
        for _, value in self.headers:
            templates.check_names(templates.placeholders(value, "header"), allowed, "header")
        if self.body is not None:
            if self.method is HttpMethod.GET:
                raise InvalidInput("body-template", "a GET request has no body")
            templates.check_names(templates.body_placeholders(self.body, "body-template"),
                                  allowed, "body-template")
        if not re.fullmatch(r"[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+(;[ -~]*)?",
                            self.content_type):
            raise InvalidInput("content-type", f"{self.content_type!r} is not a media type")
        sample = {name: "x" for name in allowed} | dict(self.params)
        check_http_url(templates.render_url(self.url, sample), "url")

    @property
    def uses_secret(self) -> bool:
        used = templates.placeholders(self.url, "url") | templates.body_placeholders(
            self.body, "body-template")
        for _, value in self.headers:
            used |= templates.placeholders(value, "header")
        return templates.SECRET in used

    @property
    def shown(self) -> str:
        return f"{self.method.value} {self.url}"


Target = WebhookTarget | EmailTarget | TemplateTarget | ServiceTarget
KIND_OF: dict[type[Any], ChannelKind] = {WebhookTarget: ChannelKind.WEBHOOK,
                                         EmailTarget: ChannelKind.EMAIL,
                                         TemplateTarget: ChannelKind.TEMPLATE,
                                         ServiceTarget: ChannelKind.SERVICE}


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelSpec:
    """Everything about a channel but its secret."""

    name: str
    target: Target
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_ms: int = DEFAULT_TIMEOUT_MS

    def __post_init__(self) -> None:
        check_name(self.name)
        _bounded(self.timeout_ms, MIN_TIMEOUT_MS, MAX_TIMEOUT_MS, "timeout", " ms")

    @property
    def kind(self) -> ChannelKind:
        return KIND_OF[type(self.target)]

    @property
    def lease_ms(self) -> int:
        """How long a delivery in flight is held: past every timeout of one send."""
        return max(60_000, 4 * self.timeout_ms)

    def config_json(self) -> str:
        """The stored form of everything but the name, the kind and the secret."""
        return json.dumps({"target": _target_doc(self.target),
                           "retry": {"max_attempts": self.retry.max_attempts,
                                     "backoff_ms": self.retry.backoff_ms,
                                     "max_backoff_ms": self.retry.max_backoff_ms},
                           "timeout_ms": self.timeout_ms}, sort_keys=True)


def channel_spec(name: str, target: Target, *, timeout_ms: int | None = None,
                 max_attempts: int | None = None, backoff_ms: int | None = None,
                 max_backoff_ms: int | None = None) -> ChannelSpec:
    """A spec from what a surface was given (None: the default). The backoff cap defaults to
    no less than the backoff given."""
    retry = RetryPolicy(
        max_attempts=DEFAULT_ATTEMPTS if max_attempts is None else max_attempts,
        backoff_ms=DEFAULT_BACKOFF_MS if backoff_ms is None else backoff_ms,
        max_backoff_ms=(max(DEFAULT_MAX_BACKOFF_MS, backoff_ms or 0) if max_backoff_ms is None
                        else max_backoff_ms))
    return ChannelSpec(name=name, target=target, retry=retry,
                       timeout_ms=DEFAULT_TIMEOUT_MS if timeout_ms is None else timeout_ms)


def _target_doc(target: Target) -> dict[str, Any]:
    if isinstance(target, WebhookTarget):
        return {"url": target.url, "headers": [list(h) for h in target.headers]}
    if isinstance(target, EmailTarget):
        return {"host": target.host, "port": target.port, "security": target.security.value,
                "username": target.username, "from": target.sender,
                "to": list(target.recipients)}
    if isinstance(target, ServiceTarget):
        return {"service": target.service, "params": [list(p) for p in target.params]}
    return {"url": target.url, "method": target.method.value, "body": target.body,
            "content_type": target.content_type, "headers": [list(h) for h in target.headers],
            "params": [list(p) for p in target.params], "preset": target.preset}


def _pairs(value: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), str(v)) for k, v in value or ())


def spec_from_stored(name: str, kind: str, config: str | Mapping[str, Any]) -> ChannelSpec:
    """A stored channel back to its spec; a row no spec can come from is RecordCorrupt."""
    try:
        doc = json.loads(config) if isinstance(config, str) else dict(config)
        t = doc["target"]
        target: Target
        if kind == ChannelKind.WEBHOOK:
            target = WebhookTarget(url=t["url"], headers=_pairs(t.get("headers")))
        elif kind == ChannelKind.EMAIL:
            target = EmailTarget(host=t["host"], port=t.get("port"),
                                 security=SmtpSecurity(t["security"]), username=t.get("username"),
                                 sender=t["from"], recipients=tuple(t["to"]))
        elif kind == ChannelKind.TEMPLATE:
            target = TemplateTarget(url=t["url"], method=HttpMethod(t["method"]), body=t["body"],
                                    content_type=t["content_type"],
                                    headers=_pairs(t.get("headers")),
                                    params=_pairs(t.get("params")), preset=t.get("preset"))
        elif kind == ChannelKind.SERVICE:
            target = ServiceTarget(service=t["service"], params=_pairs(t.get("params")))
        else:
            raise ValueError(kind)
        retry = RetryPolicy(**doc["retry"])
        return ChannelSpec(name=name, target=target, retry=retry, timeout_ms=doc["timeout_ms"])
    except (ValueError, KeyError, TypeError, InvalidInput) as exc:
        raise RecordCorrupt(f"notification channel {name!r} is stored in a shape this version "
                            f"cannot read ({type(exc).__name__})") from None


def missing_secret(target: Target, smtp_user_field: str) -> str | None:
    """Why ``target`` cannot work without a secret (None: it can); ``smtp_user_field`` is how
    the caller's surface names the SMTP user (``--smtp-user``, ``smtp_user``)."""
    if isinstance(target, TemplateTarget) and target.uses_secret:
        if target.preset is None:
            return "the template uses {secret}"
        what = "the bot token" if target.preset == "telegram" else "the device key"
        return f"the {target.preset} preset needs the secret ({what})"
    if isinstance(target, EmailTarget) and target.username is not None:
        return f"{smtp_user_field} needs the password as the secret"
    if isinstance(target, ServiceTarget):
        return secret_needed(target.service)
    return None
