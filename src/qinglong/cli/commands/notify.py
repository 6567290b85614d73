"""`ql notify`: notification channels, the rules that attach them to projects and tasks, a
test send, and the outbox of deliveries (docs/controls/notifications.md)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import click

from qinglong.cli.commands.notify_targets import FIELDS, read_secret, target_from_options
from qinglong.cli.context import services
from qinglong.cli.output import emit_json, emit_table, say, when
from qinglong.cli.params import DURATION, database_url_option, json_option
from qinglong.domain.notify.channels import (
    DEFAULT_ATTEMPTS,
    DEFAULT_BACKOFF_MS,
    DEFAULT_MAX_BACKOFF_MS,
    DEFAULT_TIMEOUT_MS,
    MAX_ATTEMPTS,
    HttpMethod,
    SmtpSecurity,
    TemplateTarget,
    WebhookTarget,
    channel_spec,
    check_name,
)
from qinglong.domain.notify.events import events_text
from qinglong.domain.notify.model import Channel, DeliveryStatus
from qinglong.domain.notify.presets import PRESETS
from qinglong.domain.notify.services import SERVICES, ServiceTarget
from qinglong.errors import DeliveryFailed
from qinglong.service.notifications import Notifications, naming
from qinglong.service.views.notify import (
    ChannelView,
    channel_view,
    delivery_view,
    sent_test_view,
    target_view,
)


@contextlib.contextmanager
def _notifications(database_url: str) -> Iterator[Notifications]:
    with services(database_url) as opened:
        yield opened.notifications


@click.group()
def notify() -> None:
    """Notifications: tell a webhook, an email address, a chat or push service (DingTalk,
    Feishu, WeCom, ServerChan, PushPlus, Telegram, Bark, ntfy, Gotify, Slack, Discord) when
    a Run fails, times out or is lost (or is cancelled, starts, succeeds, runs too long or
    has not started in time), when a trigger misfires and when it fires on time again, and
    when a queued Run waits for worker labels no live worker offers. Channels say
    where; rules attach a channel to a project or a task and name the
    events. `ql serve` (SQLite) and every `ql control` replica (PostgreSQL) deliver from a
    durable outbox, retrying with backoff; a restart loses nothing. On PostgreSQL, channels
    and rules are managed as ql_admin; the outbox is read as ql_runtime."""


# --- channels ---------------------------------------------------------------------------


@notify.group()
def channel() -> None:
    """Where notifications go. Secrets (an HMAC key, an SMTP password, a bot token) are
    read from an environment variable, a file or stdin, stored, and never printed."""


def _say_channel(verb: str, item: Channel) -> None:
    signed = ""
    if isinstance(item.spec.target, WebhookTarget):
        signed = ", signed" if item.secret_set else ", unsigned (no secret)"
    secret = "set" if item.secret_set else "not set"
    say(f"{verb} channel {item.name} ({item.spec.kind.value} {item.spec.target.shown}{signed}; "
        f"secret {secret})")


@channel.command("add")
@click.argument("name")
@click.option("--webhook", metavar="URL",
              help="A webhook: POST the JSON document, signed with the secret (HMAC-SHA256).")
@click.option("--email", is_flag=True, help="Email over SMTP (needs --smtp-host, --from, --to).")
@click.option("--template", metavar="URL",
              help="Any HTTP endpoint: a URL template with {placeholders} (see "
                   "--body-template).")
@click.option("--preset", type=click.Choice(PRESETS),
              help="A template for a service: telegram (secret: the bot token; --param "
                   "chat_id=ID) or bark (secret: the device key).")
@click.option("--service", type=click.Choice(SERVICES),
              help="A service qinglong sends to in its own format (secret: its token, key or "
                   "webhook URL; see docs/controls/notifications.md).")
@click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'",
              help="An extra HTTP header (repeatable; template values may use placeholders).")
@click.option("--method", type=click.Choice([m.value for m in HttpMethod]),
              help="Template: the HTTP method (default POST).")
@click.option("--body-template", metavar="JSON",
              help='Template: the JSON body, placeholders inside strings, e.g. '
                   '\'{"text": "{title}: {summary}"}\'.')
@click.option("--content-type", metavar="TYPE", help="Template: the body's media type.")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="Template or preset: a value for {NAME} (repeatable).")
@click.option("--smtp-host", metavar="HOST", help="Email: the SMTP server.")
@click.option("--smtp-port", type=click.IntRange(1, 65535), metavar="PORT",
              help="Email: its port (default 587, 465 with --smtp-security tls, 25 with none).")
@click.option("--smtp-security", type=click.Choice([s.value for s in SmtpSecurity]),
              help="Email: starttls (default), tls, or none.")
@click.option("--smtp-user", metavar="USER", help="Email: log in as USER (password: the secret).")
@click.option("--from", "sender", metavar="ADDRESS", help="Email: the sender.")
@click.option("--to", "recipients", multiple=True, metavar="ADDRESS",
              help="Email: a recipient (repeatable).")
@click.option("--secret-env", metavar="VAR", help="Read the secret from environment variable VAR.")
@click.option("--secret-file", type=click.Path(dir_okay=False, path_type=Path), metavar="PATH",
              help="Read the secret from a file (one line).")
@click.option("--secret-stdin", is_flag=True, help="Read the secret from the first line of stdin.")
@click.option("--no-secret", is_flag=True, help="With --replace: drop the stored secret.")
@click.option("--timeout", type=DURATION, metavar="DURATION",
              help="Per network operation of a send, 1s-60s "
                   f"(default {DEFAULT_TIMEOUT_MS // 1000}s).")
@click.option("--max-attempts", type=int, metavar="N",
              help=f"Attempts in all before a delivery is dead, 1-{MAX_ATTEMPTS} "
                   f"(default {DEFAULT_ATTEMPTS}).")
@click.option("--retry-backoff", type=DURATION, metavar="DURATION",
              help=f"First wait after a failure, doubled each time "
                   f"(default {DEFAULT_BACKOFF_MS // 1000}s).")
@click.option("--retry-max-backoff", type=DURATION, metavar="DURATION",
              help=f"Cap on the wait (default {DEFAULT_MAX_BACKOFF_MS // 60_000}m).")
@click.option("--replace", is_flag=True,
              help="Change an existing channel (its secret stays unless a new one is given).")
@database_url_option
@json_option
def channel_add(name: str, webhook: str | None, email: bool, template: str | None,
                preset: str | None, service: str | None, headers: tuple[str, ...], method: str | None,
                body_template: str | None, content_type: str | None, params: tuple[str, ...],
                smtp_host: str | None, smtp_port: int | None, smtp_security: str | None,
                smtp_user: str | None, sender: str | None, recipients: tuple[str, ...],
                secret_env: str | None, secret_file: Path | None, secret_stdin: bool,
                no_secret: bool, timeout: int | None, max_attempts: int | None,
                retry_backoff: int | None, retry_max_backoff: int | None, replace: bool,
                database_url: str, as_json: bool) -> None:
    """Add channel NAME: --webhook URL, --email, --template URL, --preset telegram|bark or
    --service dingtalk|feishu|wecom|serverchan|pushplus|ntfy|gotify|slack|discord.

    \b
    ql notify channel add ops --webhook https://hooks.example.com/ql --secret-env OPS_KEY
    ql notify channel add oncall --email --smtp-host smtp.example.com --smtp-user ql \\
        --from ql@example.com --to oncall@example.com --secret-file ~/.ql-smtp
    ql notify channel add tg --preset telegram --param chat_id=-100123 --secret-env TG_TOKEN
    ql notify channel add phone --preset bark --secret-env BARK_KEY
    ql notify channel add ding --service dingtalk --secret-env DING  # TOKEN:SIGNING_SECRET
    ql notify channel add push --service ntfy --param topic=ql-alerts
    ql notify channel add chat --template 'https://chat.example.com/hooks/{project}' \\
        --body-template '{"text": "{title}: {summary}"}'
    """
    with naming(FIELDS):
        check_name(name)
        target = target_from_options(webhook, email, template, preset, service, headers, method,
                                     body_template, content_type, params, smtp_host, smtp_port,
                                     smtp_security, smtp_user, sender, recipients)
        spec = channel_spec(name, target, timeout_ms=timeout, max_attempts=max_attempts,
                            backoff_ms=retry_backoff, max_backoff_ms=retry_max_backoff)
    secret = read_secret(secret_env, secret_file, secret_stdin)
    if no_secret and (secret is not None or not replace):
        raise click.UsageError("--no-secret goes with --replace, without a new secret")
    with _notifications(database_url) as notifications, naming({"secret": FIELDS["secret"]}):
        saved = notifications.save_channel(spec, secret, replace=replace, drop_secret=no_secret,
                                           smtp_user_field="--smtp-user")
    if as_json:
        emit_json(channel_view(saved.channel))
        return
    _say_channel("replaced" if saved.replaced else "added", saved.channel)


@channel.command("list")
@database_url_option
@json_option
def channel_list(database_url: str, as_json: bool) -> None:
    """List the channels (secrets show as set or not set, never their value)."""
    with _notifications(database_url) as notifications:
        entries = notifications.channels()
    if as_json:
        emit_json([channel_view(entry.channel, entry.rules) for entry in entries])
        return
    rows = []
    for entry in entries:
        item, target = entry.channel, entry.channel.spec.target
        preset = (target.preset if isinstance(target, TemplateTarget)
                  else target.service if isinstance(target, ServiceTarget) else None)
        rows.append((item.name, item.spec.kind.value + (f":{preset}" if preset else ""),
                     target.shown, "set" if item.secret_set else "-", len(entry.rules)))
    emit_table(rows, ["NAME", "KIND", "TARGET", "SECRET", "RULES"])


@channel.command("show")
@click.argument("name")
@database_url_option
@json_option
def channel_show(name: str, database_url: str, as_json: bool) -> None:
    """Show channel NAME and its rules (its secret shows as set or not set)."""
    with _notifications(database_url) as notifications:
        entry = notifications.channel(name)
    item, rules = entry.channel, entry.rules
    view = channel_view(item, rules)
    if as_json:
        emit_json(view)
        return
    say(f"channel   {item.name} ({item.spec.kind.value})")
    for key, value in target_view(item).to_json().items():
        if value not in (None, [], {}):
            shown = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) \
                else value
            say(f"  {key:<13} {shown}")
    say(f"secret    {view.secret}")
    retry = item.spec.retry
    say(f"retries   {retry.max_attempts} attempts, backoff {retry.backoff_ms} ms doubling to "
        f"{retry.max_backoff_ms} ms; timeout {item.spec.timeout_ms} ms")
    say("rules" if rules else "rules     (none: nothing is sent until `ql notify rule add`)")
    for rule in rules:
        said = events_text(rule.events, rule.delays, with_delay=True)
        say(f"  {rule.project_id}/{rule.task_id or '*'}: {said}")


@channel.command("remove")
@click.argument("name")
@database_url_option
@json_option
def channel_remove(name: str, database_url: str, as_json: bool) -> None:
    """Remove channel NAME and its rules; its secret is erased. Deliveries still waiting for
    it are not sent (they end dead); the delivered ones stay listed."""
    with _notifications(database_url) as notifications:
        item = notifications.remove_channel(name)
    if as_json:
        emit_json(channel_view(item).extended(ChannelView, removed=True))
        return
    say(f"removed channel {name} and its rules; deliveries still waiting for it will not be sent")


# --- test, deliveries, retry --------------------------------------------------------------


@notify.command("test")
@click.argument("channel_name", metavar="CHANNEL")
@database_url_option
@json_option
def notify_test(channel_name: str, database_url: str, as_json: bool) -> None:
    """Send a test notification to CHANNEL now (event notify.test, not through the outbox)
    and print what the receiver answered. Exit 1 when it was not delivered."""
    with _notifications(database_url) as notifications:
        sent = notifications.send_test(channel_name)
    if as_json:
        emit_json(sent_test_view(sent))
        if not sent.delivered:
            raise click.exceptions.Exit(1)
        return
    if not sent.delivered:
        raise DeliveryFailed(f"test notification to {channel_name} failed: {sent.detail} "
                             f"({sent.elapsed_ms} ms)")
    say(f"delivered to {channel_name}: {sent.detail} ({sent.elapsed_ms} ms; delivery id "
        f"{sent.id})")


@notify.command("deliveries")
@click.option("--status", type=click.Choice([s.value for s in DeliveryStatus]),
              help="Only this status.")
@click.option("--channel", "channel_name", metavar="CHANNEL", help="Only this channel.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@database_url_option
@json_option
def deliveries(status: str | None, channel_name: str | None, limit: int, database_url: str,
               as_json: bool) -> None:
    """The outbox, newest first: each notification for each channel, with its status
    (pending, sending, delivered, dead), attempts and last error."""
    with _notifications(database_url) as notifications:
        items = notifications.deliveries(
            status=None if status is None else DeliveryStatus(status), channel=channel_name,
            limit=limit)
    if as_json:
        emit_json([delivery_view(item) for item in items])
        return
    rows = []
    for item in items:
        subject = f"{item.project_id}/{item.trigger_id or item.task_id or '-'}"
        moment = (item.finished_at_ms if item.next_attempt_at_ms is None
                  else item.next_attempt_at_ms)
        rows.append((item.id[:13], item.status.value, item.channel, item.event, subject,
                     f"{item.attempts}/{item.max_attempts}", when(moment),
                     item.last_error or ("-" if item.last_status is None else item.last_status)))
    emit_table(rows, ["ID", "STATUS", "CHANNEL", "EVENT", "SUBJECT", "ATTEMPTS",
                      "NEXT/ENDED", "LAST"])


@notify.command("retry")
@click.argument("delivery_id", metavar="DELIVERY")
@database_url_option
@json_option
def retry(delivery_id: str, database_url: str, as_json: bool) -> None:
    """Send a dead DELIVERY again (its id, or the start of it), from its first attempt."""
    with naming(FIELDS), _notifications(database_url) as notifications:
        item = notifications.retry_delivery(delivery_id)
    if as_json:
        emit_json(delivery_view(item))
        return
    say(f"delivery {item.id} to {item.channel} is pending again ({item.max_attempts} attempts)")
