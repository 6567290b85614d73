"""Sending one notification: an HTTP request (webhook, template) or an SMTP transaction.

Each send is bounded by the channel's timeout (per network operation), follows no redirect,
and comes back as a `SendResult` whose one-line ``detail`` never holds the secret. An HTTP
answer 2xx is delivered; anything else (another status, a refused or timed-out connection)
is a failure the dispatcher retries.
"""

from __future__ import annotations

import http.client
import smtplib
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate
from typing import Any
from urllib.parse import urlsplit

from qinglong import __version__
from qinglong.clock import Clock
from qinglong.domain.notify import payload as documents
from qinglong.domain.notify import services, signing, templates
from qinglong.domain.notify.channels import (
    ChannelSpec,
    EmailTarget,
    SmtpSecurity,
    TemplateTarget,
    WebhookTarget,
)
from qinglong.domain.notify.services import ServiceTarget

USER_AGENT = f"qinglong/{__version__}"
MAX_DETAIL = 300
RESPONSE_PEEK = 2048


@dataclass(frozen=True, slots=True, kw_only=True)
class SendResult:
    ok: bool
    status: int | None  # the HTTP status or the SMTP reply code, when one came back
    detail: str  # one line for people; never the secret
    elapsed_ms: int


def _one_line(text: str, secrets: tuple[str, ...]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    text = " ".join(text.split())
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 3] + "..."


def _network_error(exc: BaseException, timeout_s: float) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    if isinstance(exc, socket.gaierror):
        return "cannot resolve the host name"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or type(exc).__name__})"
    if isinstance(exc, smtplib.SMTPAuthenticationError):
        return f"SMTP {exc.smtp_code}: authentication failed"
    if isinstance(exc, smtplib.SMTPResponseException):
        error = exc.smtp_error
        text = error.decode(errors="replace") if isinstance(error, bytes) else str(error)
        return f"SMTP {exc.smtp_code}: {text}"
    if isinstance(exc, smtplib.SMTPServerDisconnected):
        return "the SMTP server closed the connection"
    if isinstance(exc, ConnectionError):
        return f"connection failed ({exc.strerror or type(exc).__name__})"
    return f"{type(exc).__name__}: {exc}"


class Sender:
    """Sends documents to channels; the clock dates them (and times each send)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def send(self, spec: ChannelSpec, secret: str | None,
             payload: Mapping[str, Any]) -> SendResult:
        started = self._clock.monotonic()
        timeout_s = spec.timeout_ms / 1000
        try:
            target = spec.target
            if isinstance(target, WebhookTarget):
                ok, status, detail = self._webhook(target, secret, payload, timeout_s)
            elif isinstance(target, TemplateTarget):
                ok, status, detail = self._template(target, secret, payload, timeout_s)
            elif isinstance(target, ServiceTarget):
                ok, status, detail = self._service(target, secret, payload, timeout_s)
            else:
                ok, status, detail = self._email(target, secret, payload, timeout_s)
        except (OSError, http.client.HTTPException, smtplib.SMTPException) as exc:
            ok, status, detail = False, getattr(exc, "smtp_code", None), _network_error(
                exc, timeout_s)
        elapsed = int((self._clock.monotonic() - started) * 1000)
        hidden = (services.secret_parts(target.service, secret)
                  if isinstance(target, ServiceTarget) else (secret,) if secret else ())
        return SendResult(ok=ok, status=status, detail=_one_line(detail, hidden),
                          elapsed_ms=max(0, elapsed))

    # -- HTTP ---------------------------------------------------------------------------

    def _headers(self, payload: Mapping[str, Any]) -> dict[str, str]:
        return {"User-Agent": USER_AGENT,
                signing.EVENT_HEADER: str(payload["event"]),
                signing.DELIVERY_HEADER: str(payload["id"]),
                signing.IDEMPOTENCY_HEADER: str(payload["id"])}

    def _webhook(self, target: WebhookTarget, secret: str | None, payload: Mapping[str, Any],
                 timeout_s: float) -> tuple[bool, int | None, str]:
        body = documents.body(payload)
        headers = {**dict(target.headers), **self._headers(payload),
                   "Content-Type": "application/json"}
        if secret is not None:
            now_s = self._clock.now_ms() // 1000
            headers[signing.TIMESTAMP_HEADER] = str(now_s)
            headers[signing.SIGNATURE_HEADER] = signing.signature(secret, now_s, body)
        return _request("POST", target.url, headers, body, timeout_s)

    def _template(self, target: TemplateTarget, secret: str | None, payload: Mapping[str, Any],
                  timeout_s: float) -> tuple[bool, int | None, str]:
        values = documents.template_values(payload, secret=secret, params=dict(target.params))
        url = templates.render_url(target.url, values)
        headers = {name: templates.render_text(value, values) for name, value in target.headers}
        headers.update(self._headers(payload))
        body = None
        if target.body is not None:
            headers.setdefault("Content-Type", target.content_type)
            rendered = templates.render_body(target.body, values)
            body = documents.body(rendered) if isinstance(rendered, dict | list) else None
        return _request(target.method.value, url, headers, body, timeout_s)

    def _service(self, target: ServiceTarget, secret: str | None, payload: Mapping[str, Any],
                 timeout_s: float) -> tuple[bool, int | None, str]:
        """A service's own request, built (and signed, for DingTalk and Feishu) at this
        instant of the clock; a 2xx answer whose JSON says it failed is a failure."""
        request = services.request(target, secret, payload, now_ms=self._clock.now_ms())
        headers = {**request.headers, **self._headers(payload)}

        def judge(status: int, answer: str) -> tuple[bool, str | None]:
            return services.judge(target.service, status, answer)

        return _request(request.method, request.url, headers, request.body, timeout_s, judge)

    # -- SMTP ---------------------------------------------------------------------------

    def _email(self, target: EmailTarget, secret: str | None, payload: Mapping[str, Any],
               timeout_s: float) -> tuple[bool, int | None, str]:
        message = EmailMessage()
        message["Subject"] = str(payload["title"])
        message["From"] = target.sender
        message["To"] = ", ".join(target.recipients)
        message["Date"] = formatdate(self._clock.now_ms() / 1000, usegmt=True)
        message["Message-ID"] = f"<{payload['id']}@qinglong>"
        message[signing.EVENT_HEADER] = str(payload["event"])
        message[signing.DELIVERY_HEADER] = str(payload["id"])
        message.set_content(documents.email_text(payload))
        context = ssl.create_default_context()
        port = target.effective_port
        client: smtplib.SMTP
        if target.security is SmtpSecurity.TLS:
            client = smtplib.SMTP_SSL(target.host, port, timeout=timeout_s, context=context)
        else:
            client = smtplib.SMTP(target.host, port, timeout=timeout_s)
        try:
            client.ehlo()
            if target.security is SmtpSecurity.STARTTLS:
                client.starttls(context=context)
                client.ehlo()
            if target.username is not None:
                client.login(target.username, secret or "")
            code, reply = client.mail(target.sender)
            if code != 250:
                return False, code, f"SMTP {code} to MAIL FROM: {reply.decode(errors='replace')}"
            for recipient in target.recipients:
                code, reply = client.rcpt(recipient)
                if code not in (250, 251):
                    return False, code, (f"SMTP {code} for {recipient}: "
                                         f"{reply.decode(errors='replace')}")
            code, reply = client.data(message.as_bytes())
            return True, code, f"SMTP {code}: {reply.decode(errors='replace')}"
        finally:
            try:
                client.quit()
            except (OSError, smtplib.SMTPException):
                client.close()


def _request(method: str, url: str, headers: Mapping[str, str], body: bytes | None,
             timeout_s: float,
             judge: Callable[[int, str], tuple[bool, str | None]] | None = None,
             ) -> tuple[bool, int | None, str]:
    parts = urlsplit(url)
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(parts.hostname or "", parts.port,
                                                 timeout=timeout_s,
                                                 context=ssl.create_default_context())
    else:
        connection = http.client.HTTPConnection(parts.hostname or "", parts.port,
                                                timeout=timeout_s)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request(method, path, body=body, headers=dict(headers))
        response = connection.getresponse()
        peek = response.read(RESPONSE_PEEK).decode("utf-8", errors="replace")
        status = response.status
        reason = response.reason
    finally:
        connection.close()
    if 200 <= status < 300:
        ok, why = (True, None) if judge is None else judge(status, peek)
        if not ok:
            return False, status, why or f"HTTP {status} {reason}: refused"
        return True, status, f"HTTP {status} {reason}".strip()
    if 300 <= status < 400:
        return False, status, (f"HTTP {status} {reason}: redirects are not followed; use "
                               "the final URL")
    return False, status, f"HTTP {status} {reason}" + (f": {peek}" if peek.strip() else "")
