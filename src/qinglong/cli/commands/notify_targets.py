"""How `ql notify channel add` reads a channel's target and its secret from its options, and
names the option behind a field the notification model refuses."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from qinglong.domain.notify.channels import (
    EmailTarget,
    HttpMethod,
    SmtpSecurity,
    Target,
    TemplateTarget,
    WebhookTarget,
    check_secret,
    parse_header,
)
from qinglong.domain.notify.presets import preset_target
from qinglong.domain.notify.services import service_target
from qinglong.domain.notify.templates import parse_body_template
from qinglong.errors import InvalidInput
from qinglong.service.notifications import naming

FIELDS = {"header": "--header", "smtp-host": "--smtp-host", "smtp-port": "--smtp-port",
           "smtp-user": "--smtp-user", "from": "--from", "to": "--to", "param": "--param",
           "body-template": "--body-template", "content-type": "--content-type",
           "events": "--events", "max-attempts": "--max-attempts",
           "retry-backoff": "--retry-backoff", "retry-max-backoff": "--retry-max-backoff",
           "timeout": "--timeout", "channel": "CHANNEL", "preset": "--preset", "service": "--service",
           "secret": "--secret-env/--secret-file/--secret-stdin", "delivery": "DELIVERY"}


def read_secret(env: str | None, file: Path | None, stdin: bool) -> str | None:
    """The secret from --secret-env, --secret-file or --secret-stdin (at most one); None when
    none is given."""
    given = [flag for flag, value in (("--secret-env", env), ("--secret-file", file),
                                      ("--secret-stdin", stdin)) if value]
    if len(given) > 1:
        raise click.UsageError(f"give at most one of {', '.join(given)}")
    if env:
        value = os.environ.get(env)
        if value is None:
            raise InvalidInput("--secret-env", f"the environment variable {env} is not set")
        return check_secret(value.strip(), "--secret-env")
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not UTF-8 text"
            raise InvalidInput("--secret-file", f"cannot read {str(file)!r} ({reason})") from None
        return check_secret(text.strip(), "--secret-file")
    if stdin:
        return check_secret(sys.stdin.readline().strip(), "--secret-stdin")
    return None


def _pairs(values: tuple[str, ...], option: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for text in values:
        name, found, value = text.partition("=")
        if not found or not name.strip():
            raise InvalidInput(option, f"{text!r} is not NAME=VALUE")
        pairs.append((name.strip(), value))
    return tuple(pairs)


def _refuse(kind: str, **given: object) -> None:
    extra = [name for name, value in given.items() if value not in (None, (), False)]
    if extra:
        options = ", ".join("--" + name.replace("_", "-") for name in extra)
        verb = "does" if len(extra) == 1 else "do"
        raise click.UsageError(f"{options} {verb} not apply to a {kind} channel")


def target_from_options(webhook: str | None, email: bool, template: str | None,
                        preset: str | None, service: str | None, headers: tuple[str, ...], method: str | None,
                        body_template: str | None, content_type: str | None,
                        params: tuple[str, ...], smtp_host: str | None, smtp_port: int | None,
                        smtp_security: str | None, smtp_user: str | None, sender: str | None,
                        recipients: tuple[str, ...]) -> Target:
    kinds = [flag for flag, value in (("--webhook", webhook), ("--email", email),
                                      ("--template", template), ("--preset", preset),
                                      ("--service", service)) if value]
    if len(kinds) != 1:
        raise click.UsageError("give exactly one of --webhook URL, --email, --template URL, "
                               "--preset telegram|bark and --service NAME")
    smtp = {"smtp_host": smtp_host, "smtp_port": smtp_port, "smtp_security": smtp_security,
            "smtp_user": smtp_user, "from": sender, "to": recipients}
    http = {"method": method, "body_template": body_template, "content_type": content_type}
    if webhook is not None:
        _refuse("webhook", param=params, **http, **smtp)
        with naming({**FIELDS, "url": "--webhook"}):
            return WebhookTarget(url=webhook, headers=tuple(parse_header(h) for h in headers))
    if email:
        _refuse("email", header=headers, param=params, **http)
        if not smtp_host or not sender or not recipients:
            raise click.UsageError("an email channel needs --smtp-host, --from and --to")
        with naming(FIELDS):
            return EmailTarget(host=smtp_host, port=smtp_port,
                               security=SmtpSecurity(smtp_security or SmtpSecurity.STARTTLS),
                               username=smtp_user, sender=sender, recipients=recipients)
    if service is not None:
        _refuse("service", header=headers, **http, **smtp)
        with naming(FIELDS):
            return service_target(service, dict(_pairs(params, "--param")))
    if preset is not None:
        _refuse("preset", header=headers, **http, **smtp)
        with naming(FIELDS):
            return preset_target(preset, dict(_pairs(params, "--param")))
    assert template is not None
    _refuse("template", **smtp)
    with naming({**FIELDS, "url": "--template"}):
        return TemplateTarget(
            url=template, method=HttpMethod(method or HttpMethod.POST),
            body=None if body_template is None else parse_body_template(body_template),
            content_type=content_type or "application/json",
            headers=tuple(parse_header(h) for h in headers),
            params=_pairs(params, "--param"))
