"""Services: channels for chat and push services whose requests a template cannot express
(a signature computed at send time, a URL that is itself the secret, a plain-text body, an
answer that says "failed" with HTTP 200).

A service channel holds its service's name and a few parameters (never secret); the secret
holds the credential. ``request`` builds the HTTP request of one send, at the instant the
sender passes in (the signatures of DingTalk and Feishu are over that instant); ``judge``
reads the service's answer. Nothing here does I/O (``notify/senders`` sends).

| service | secret | parameters |
| --- | --- | --- |
| dingtalk | ``ACCESS_TOKEN`` or ``ACCESS_TOKEN:SIGNING_SECRET`` | server |
| feishu | ``HOOK_TOKEN`` or ``HOOK_TOKEN:SIGNING_SECRET`` | server |
| wecom | the robot's key | server |
| serverchan | the SendKey | server |
| pushplus | the token | server, topic |
| ntfy | an access token (optional) | topic (required), server, priority |
| gotify | the application token | server (required), priority |
| slack, discord | the incoming webhook URL | none |
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from email.header import Header
from typing import Any
from urllib.parse import quote

from qinglong.domain.notify import payload as documents
from qinglong.domain.notify.templates import PARAM_NAME
from qinglong.domain.notify.urls import MAX_URL, check_http_url
from qinglong.errors import InvalidInput

# The services a ``service`` channel can send to.
SERVICES = ("dingtalk", "feishu", "wecom", "serverchan", "pushplus", "ntfy", "gotify", "slack",
            "discord")
MAX_PARAMS = 16

TOKEN = re.compile(r"^[A-Za-z0-9._~+/=-]{1,512}$")  # a token as services print them
TOPIC = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
SCTP = re.compile(r"^sctp(\d+)t")  # a ServerChan 3 SendKey names its own server

DEFAULT_SERVERS = {"dingtalk": "https://oapi.dingtalk.com", "feishu": "https://open.feishu.cn",
                   "wecom": "https://qyapi.weixin.qq.com", "serverchan": "https://sctapi.ftqq.com",
                   "pushplus": "https://www.pushplus.plus", "ntfy": "https://ntfy.sh"}
PARAMS: dict[str, tuple[str, ...]] = {
    "dingtalk": ("server",), "feishu": ("server",), "wecom": ("server",),
    "serverchan": ("server",), "pushplus": ("server", "topic"),
    "ntfy": ("server", "topic", "priority"), "gotify": ("server", "priority"),
    "slack": (), "discord": ()}
REQUIRED: dict[str, tuple[str, ...]] = {"ntfy": ("topic",), "gotify": ("server",)}
# What the secret is, for the messages that ask for it.
SECRET_IS = {"dingtalk": "the access token, or ACCESS_TOKEN:SIGNING_SECRET",
             "feishu": "the hook token, or HOOK_TOKEN:SIGNING_SECRET",
             "wecom": "the robot's key", "serverchan": "the SendKey",
             "pushplus": "the token", "ntfy": "an access token",
             "gotify": "the application token", "slack": "the incoming webhook URL",
             "discord": "the webhook URL"}
SECRET_OPTIONAL = frozenset({"ntfy"})
URL_SECRET = frozenset({"slack", "discord"})
SIGNED = frozenset({"dingtalk", "feishu"})
WECOM_MAX_BYTES = 2048
SERVERCHAN_MAX_TITLE = 32
DISCORD_MAX = 2000


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceTarget:
    """A service qinglong sends to in that service's own shape, with its parameters (never
    secret: the credential is the channel's secret). ``services.service_target`` checks the
    parameters of each service; this checks only their shape."""

    service: str
    params: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.service not in SERVICES:
            raise InvalidInput("service", f"unknown service {self.service!r}; use "
                                          + ", ".join(SERVICES))
        if len(self.params) > MAX_PARAMS:
            raise InvalidInput("param", f"at most {MAX_PARAMS} parameters")
        for name, value in self.params:
            if not PARAM_NAME.fullmatch(name):
                raise InvalidInput("param", f"{name!r} is not a parameter name")
            if len(value) > MAX_URL or any(c in value for c in "\r\n\0"):
                raise InvalidInput("param", f"the value of {name} must be one line of at most "
                                            f"{MAX_URL} characters")

    @property
    def shown(self) -> str:
        params = dict(self.params)
        where = params.get("server", "")
        if params.get("topic"):
            where = f"{where}/{params['topic']}" if where else f"topic {params['topic']}"
        return f"{self.service} {where}".strip()


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpRequest:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes


def _server(service: str, value: str) -> str:
    server = value.rstrip("/")
    check_http_url(server, "param")
    if "?" in server:
        raise InvalidInput("param", f"the {service} server must not have a ?query")
    return server


def service_target(service: str, params: Mapping[str, str]) -> ServiceTarget:
    """A service channel's target, its parameters checked: unknown or missing ones, a
    server that is not an http(s) URL, a topic or priority out of shape are refused."""
    if service not in SERVICES:
        raise InvalidInput("service", f"unknown service {service!r}; use {', '.join(SERVICES)}")
    allowed = PARAMS[service]
    for name in params:
        if name not in allowed:
            takes = ("takes no parameter" if not allowed
                     else "takes only " + ", ".join(allowed))
            raise InvalidInput("param", f"{service} {takes} (not {name!r})")
    for name in REQUIRED.get(service, ()):
        if not params.get(name):
            raise InvalidInput("param", f"the {service} service needs --param {name}=...")
    checked = dict(params)
    if "server" in checked:
        checked["server"] = _server(service, checked["server"])
    if "topic" in checked and not TOPIC.fullmatch(checked["topic"]):
        raise InvalidInput("param", "topic must be 1-64 letters, digits, '-' or '_'")
    if "priority" in checked:
        low, high = (1, 5) if service == "ntfy" else (0, 10)
        value = checked["priority"]
        if not value.isdigit() or not low <= int(value) <= high:
            raise InvalidInput("param", f"the {service} priority must be {low}-{high}")
    return ServiceTarget(service=service, params=tuple(sorted(checked.items())))


def secret_needed(service: str) -> str | None:
    """Why a channel of ``service`` cannot work without a secret (None: it can)."""
    if service in SECRET_OPTIONAL:
        return None
    return f"the {service} service needs the secret ({SECRET_IS[service]})"


def _split(secret: str) -> tuple[str, str | None]:
    token, colon, signing = secret.partition(":")
    return token, (signing if colon else None)


def check_secret(service: str, secret: str) -> str:
    """The secret of a ``service`` channel, in the shape that service gives it (InvalidInput
    on ``secret`` otherwise; the message never holds the secret)."""
    if service in URL_SECRET:
        try:
            check_http_url(secret, "secret")
        except InvalidInput:
            raise InvalidInput("secret", f"the {service} secret must be {SECRET_IS[service]} "
                                         "(http:// or https://, no credentials)") from None
        return secret
    token, signing = _split(secret) if service in SIGNED else (secret, None)
    if not TOKEN.fullmatch(token) or (signing is not None and not TOKEN.fullmatch(signing)):
        raise InvalidInput("secret", f"the {service} secret must be {SECRET_IS[service]} "
                                     "(letters, digits and ._~+/=-, no spaces)")
    return secret


def secret_parts(service: str, secret: str | None) -> tuple[str, ...]:
    """What of ``secret`` must never show in a message: itself and each of its parts."""
    if not secret:
        return ()
    parts = [secret]
    if service in SIGNED:
        parts += [part for part in secret.split(":") if part]
    if service in URL_SECRET:
        tail = secret.rstrip("/").rpartition("/")[2]
        if len(tail) >= 8:
            parts.append(tail)
    return tuple(parts)


def dingtalk_sign(secret: str, timestamp_ms: int) -> str:
    """DingTalk's signature (before URL encoding): base64 of HMAC-SHA256 keyed by the
    signing secret over ``<timestamp ms>\\n<secret>``."""
    text = f"{timestamp_ms}\n{secret}".encode()
    return base64.b64encode(hmac.new(secret.encode(), text, hashlib.sha256).digest()).decode()


def feishu_sign(secret: str, timestamp_s: int) -> str:
    """Feishu's signature: base64 of HMAC-SHA256 keyed by ``<timestamp s>\\n<secret>`` over
    an empty message."""
    key = f"{timestamp_s}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


def _text(payload: Mapping[str, Any]) -> tuple[str, str]:
    return str(payload["title"]), str(payload["summary"])


def _cut_bytes(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode("utf-8", errors="ignore") + "..."


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _json(url: str, body: Any, headers: Mapping[str, str] | None = None) -> HttpRequest:
    return HttpRequest(method="POST", url=url,
                       headers={"Content-Type": "application/json; charset=utf-8",
                                **(headers or {})},
                       body=documents.body(body))


def _header_text(text: str) -> str:
    """A header value: as it is when ASCII, else RFC 2047 encoded (ntfy decodes it)."""
    return text if text.isascii() else Header(text, "utf-8").encode()


def request(target: ServiceTarget, secret: str | None, payload: Mapping[str, Any], *,
            now_ms: int) -> HttpRequest:
    """The request that sends ``payload`` through ``target`` at ``now_ms`` (the instant the
    sender read from its clock: DingTalk and Feishu sign it)."""
    service, params = target.service, dict(target.params)
    if secret is None and service not in SECRET_OPTIONAL:
        raise InvalidInput("secret", secret_needed(service) or "needs a secret")
    if secret is not None:
        check_secret(service, secret)
    title, summary = _text(payload)
    server = params.get("server") or DEFAULT_SERVERS.get(service, "")
    text = f"{title}\n{summary}"
    if service == "dingtalk":
        token, signing = _split(secret or "")
        url = f"{server}/robot/send?access_token={quote(token, safe='')}"
        if signing is not None:
            url += (f"&timestamp={now_ms}"
                    f"&sign={quote(dingtalk_sign(signing, now_ms), safe='')}")
        return _json(url, {"msgtype": "text", "text": {"content": text}})
    if service == "feishu":
        token, signing = _split(secret or "")
        body: dict[str, Any] = {"msg_type": "text", "content": {"text": text}}
        if signing is not None:
            now_s = now_ms // 1000
            body |= {"timestamp": str(now_s), "sign": feishu_sign(signing, now_s)}
        return _json(f"{server}/open-apis/bot/v2/hook/{quote(token, safe='')}", body)
    if service == "wecom":
        return _json(f"{server}/cgi-bin/webhook/send?key={quote(secret or '', safe='')}",
                     {"msgtype": "text", "text": {"content": _cut_bytes(text, WECOM_MAX_BYTES)}})
    if service == "serverchan":
        key = secret or ""
        sctp = SCTP.match(key)
        if "server" not in params and sctp:
            server = f"https://{sctp.group(1)}.push.ft07.com/send"
        short = title if len(title) <= SERVERCHAN_MAX_TITLE else title[:SERVERCHAN_MAX_TITLE - 3] + "..."
        return _json(f"{server}/{quote(key, safe='')}.send", {"title": short, "desp": summary})
    if service == "pushplus":
        doc = {"token": secret, "title": title, "content": summary, "template": "txt"}
        if params.get("topic"):
            doc["topic"] = params["topic"]
        return _json(f"{server}/send", doc)
    if service == "ntfy":
        headers = {"Title": _header_text(title), "Content-Type": "text/plain; charset=utf-8"}
        if params.get("priority"):
            headers["Priority"] = params["priority"]
        if secret is not None:
            headers["Authorization"] = f"Bearer {secret}"
        return HttpRequest(method="POST", url=f"{server}/{params['topic']}", headers=headers,
                           body=summary.encode("utf-8"))
    if service == "gotify":
        return _json(f"{server}/message",
                     {"title": title, "message": summary,
                      "priority": int(params.get("priority") or 5)},
                     {"X-Gotify-Key": secret or ""})
    if service == "slack":
        return _json(secret or "", {"text": f"*{_slack_escape(title)}*\n"
                                            f"{_slack_escape(summary)}"})
    if service == "discord":
        content = f"**{title}**\n{summary}"
        if len(content) > DISCORD_MAX:
            content = content[: DISCORD_MAX - 3] + "..."
        return _json(secret or "", {"content": content, "allowed_mentions": {"parse": []}})
    raise InvalidInput("service", f"unknown service {service!r}")


def judge(service: str, status: int, answer: str) -> tuple[bool, str | None]:
    """Whether a 2xx answer of ``service`` means it took the message (the Chinese services
    answer 200 with an error code in the JSON); the service's message when it did not."""
    try:
        doc = json.loads(answer) if answer.strip().startswith("{") else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        return True, None
    if service in ("dingtalk", "wecom"):
        code, message = doc.get("errcode", 0), doc.get("errmsg")
    elif service == "feishu":
        code = doc.get("code", doc.get("StatusCode", 0))
        message = doc.get("msg", doc.get("StatusMessage"))
    elif service == "serverchan":
        code, message = doc.get("code", 0), doc.get("message") or doc.get("info")
    elif service == "pushplus":
        code, message = (0 if doc.get("code", 200) == 200 else doc.get("code")), doc.get("msg")
    else:
        return True, None
    if code in (0, None):
        return True, None
    return False, f"HTTP {status}, {service} answered code {code}: {message or 'no message'}"
