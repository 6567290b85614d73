"""Routes for notifications (`ql notify` over HTTP): channels, the rules that attach them to
projects and tasks, a test send, the outbox of deliveries and retrying a dead one. The same
store and the same JSON shapes as ``ql notify ... --json``; a channel's secret is written,
used to send, and never shown back (``"secret": "set"`` or ``"not set"``)."""

from __future__ import annotations

import json

from qinglong.domain.identifiers import entity_id, project_id
from qinglong.domain.notify.channels import (
    ChannelSpec,
    EmailTarget,
    HttpMethod,
    SmtpSecurity,
    Target,
    TemplateTarget,
    WebhookTarget,
    channel_spec,
    check_name,
    parse_header,
)
from qinglong.domain.notify.events import DEFAULT_EVENTS, parse_events
from qinglong.domain.notify.model import DeliveryStatus
from qinglong.domain.notify.presets import preset_target
from qinglong.domain.notify.services import service_target
from qinglong.domain.notify.templates import parse_body_template
from qinglong.errors import InvalidInput
from qinglong.service.accounts import Level
from qinglong.service.notifications import MAX_LIST, naming
from qinglong.service.views import notify as views
from qinglong.service.views.notify import (
    RuleRemovedView,
    channel_view,
    delivery_view,
    rule_view,
    sent_test_view,
)
from qinglong.web import requests as rq
from qinglong.web.routing import Call, Endpoint, Query, Reply

N = "/api/v1/notify"
C = N + "/channels/{channel}"

# The notify domain's field names as the request's fields name them.
_FIELDS = {"header": "headers", "smtp-host": "smtp_host", "smtp-port": "smtp_port",
           "smtp-user": "smtp_user", "param": "params", "body-template": "body_template",
           "content-type": "content_type", "max-attempts": "max_attempts",
           "retry-backoff": "retry_backoff_ms", "retry-max-backoff": "retry_max_backoff_ms",
           "timeout": "timeout_ms", "channel": "name", "delivery": "delivery"}


def _refuse(kind: str, body: rq.ChannelRequest, *names: str) -> None:
    given = body.model_fields_set
    for name in names:
        if name in given and getattr(body, name) not in (None, [], {}, False):
            shown = "from" if name == "from_" else name
            raise InvalidInput(shown, f"does not apply to a {kind} channel")


_SMTP = ("smtp_host", "smtp_port", "smtp_security", "smtp_user", "from_", "to")
_TEMPLATE = ("method", "body_template", "content_type")


def _target(body: rq.ChannelRequest) -> Target:
    headers = tuple(parse_header(text, "headers") for text in body.headers)
    params = tuple(body.params.items())
    if body.kind != "service":
        _refuse(body.kind, body, "service")
    if body.kind == "service":
        _refuse("service", body, "url", "preset", "headers", *_TEMPLATE, *_SMTP)
        if body.service is None:
            raise InvalidInput("service", "a service channel names its service")
        return service_target(body.service, dict(params))
    if body.kind == "webhook":
        _refuse("webhook", body, "preset", "params", *_TEMPLATE, *_SMTP)
        if body.url is None:
            raise InvalidInput("url", "a webhook channel needs its url")
        return WebhookTarget(url=body.url, headers=headers)
    if body.kind == "email":
        _refuse("email", body, "url", "preset", "headers", "params", *_TEMPLATE)
        if body.smtp_host is None:
            raise InvalidInput("smtp_host", "an email channel needs smtp_host, from and to")
        if body.from_ is None:
            raise InvalidInput("from", "an email channel needs smtp_host, from and to")
        return EmailTarget(host=body.smtp_host, port=body.smtp_port,
                           security=SmtpSecurity(body.smtp_security or SmtpSecurity.STARTTLS),
                           username=body.smtp_user, sender=body.from_,
                           recipients=tuple(body.to))
    _refuse("template", body, *_SMTP)
    if body.preset is not None:
        _refuse("preset", body, "url", "headers", *_TEMPLATE)
        return preset_target(body.preset, dict(params))
    if body.url is None:
        raise InvalidInput("url", "a template channel needs its url (or a preset)")
    template = None
    if body.body_template is not None:
        template = parse_body_template(json.dumps(body.body_template), "body_template")
    return TemplateTarget(url=body.url, method=HttpMethod(body.method or HttpMethod.POST),
                          body=template, content_type=body.content_type or "application/json",
                          headers=headers, params=params)


def _spec(body: rq.ChannelRequest) -> ChannelSpec:
    with naming(_FIELDS):
        check_name(body.name)
        return channel_spec(body.name, _target(body), timeout_ms=body.timeout_ms,
                            max_attempts=body.max_attempts, backoff_ms=body.retry_backoff_ms,
                            max_backoff_ms=body.retry_max_backoff_ms)


def _channel(call: Call) -> str:
    with naming({"channel": "channel"}):
        return check_name(call.path["channel"])


# --- channels ---------------------------------------------------------------------------


def list_channels(call: Call) -> Reply:
    return Reply([channel_view(entry.channel, entry.rules)
                  for entry in call.backend.notifications.channels()])


def show_channel(call: Call) -> Reply:
    entry = call.backend.notifications.channel(_channel(call))
    return Reply(channel_view(entry.channel, entry.rules))


def put_channel(call: Call) -> Reply:
    body: rq.ChannelRequest = call.body
    spec = _spec(body)
    notifications = call.backend.notifications
    saved = notifications.save_channel(spec, body.secret, replace=body.replace,
                                       drop_secret=body.drop_secret, smtp_user_field="smtp_user")
    call.audit("notify.channel.put", target=f"channel {spec.name}",
               detail={"kind": spec.kind.value, "replaced": saved.replaced,
                       "secret": saved.secret.value})
    return Reply(channel_view(saved.channel, notifications.rules(channel=spec.name)),
                 200 if saved.replaced else 201)


def remove_channel(call: Call) -> Reply:
    name = _channel(call)
    item = call.backend.notifications.remove_channel(name)
    call.audit("notify.channel.remove", target=f"channel {name}")
    return Reply(channel_view(item).extended(views.ChannelView, removed=True))


def send_test(call: Call) -> Reply:
    name = _channel(call)
    sent = call.backend.notifications.send_test(name)
    call.audit("notify.test", target=f"channel {name}",
               detail={"delivered": sent.delivered, "status": sent.status})
    return Reply(sent_test_view(sent))


# --- rules ------------------------------------------------------------------------------


def list_rules(call: Call) -> Reply:
    q = call.query
    return Reply([rule_view(r) for r in call.backend.notifications.rules(
        channel=q["channel"], project_id=q["project"])])


# A delay's field in the notification model as the request names it.
_DELAYS = {"unplaceable_after": "unplaceable_after_ms",
           "running_long_after": "running_long_after_ms",
           "late_start_after": "late_start_after_ms"}


def _rule_target(body: rq.RuleRequest) -> None:
    with naming({"channel": "channel"}):
        check_name(body.channel)
    project_id(body.project)
    if body.task is not None:
        entity_id(body.task, "task")
    if body.events is not None and not body.events:
        raise InvalidInput("events", "name at least one event (or leave events out)")


def add_rule(call: Call) -> Reply:
    body: rq.RuleRequest = call.body
    _rule_target(body)
    events = parse_events(body.events, "events") if body.events else DEFAULT_EVENTS
    with naming(_DELAYS):
        rules = call.backend.notifications.add_rule(
            body.channel, body.project, body.task, events, body.unplaceable_after_ms,
            running_long_after_ms=body.running_long_after_ms,
            late_start_after_ms=body.late_start_after_ms)
    call.audit("notify.rule.add", project=body.project, target=f"channel {body.channel}",
               detail={"task": body.task, "events": [e.value for e in events],
                       "unplaceable_after_ms": body.unplaceable_after_ms,
                       "running_long_after_ms": body.running_long_after_ms,
                       "late_start_after_ms": body.late_start_after_ms})
    return Reply([rule_view(r) for r in rules], 201)


def remove_rule(call: Call) -> Reply:
    body: rq.RuleRequest = call.body
    _rule_target(body)
    for name in _DELAYS.values():
        if getattr(body, name) is not None:
            raise InvalidInput(name, "goes with adding a rule, not removing one")
    events = parse_events(body.events, "events") if body.events else None
    removed = call.backend.notifications.remove_rule(body.channel, body.project, body.task,
                                                      events)
    call.audit("notify.rule.remove", project=body.project, target=f"channel {body.channel}",
               detail={"task": body.task, "events": None if events is None
                       else [e.value for e in events], "removed": removed})
    return Reply(RuleRemovedView(removed=removed))


# --- deliveries -------------------------------------------------------------------------


def list_deliveries(call: Call) -> Reply:
    q = call.query
    status = q["status"]
    return Reply([delivery_view(item) for item in call.backend.notifications.deliveries(
        status=None if status is None else DeliveryStatus(status), channel=q["channel"],
        limit=q["limit"])])


def retry_delivery(call: Call) -> Reply:
    given = call.path["delivery"]
    if len(given) > 36:
        raise InvalidInput("delivery", "is not a delivery id (or the start of one)")
    with naming(_FIELDS):
        item = call.backend.notifications.retry_delivery(given)
    call.audit("notify.retry", target=f"delivery {item.id}", detail={"channel": item.channel})
    return Reply(delivery_view(item))


SECRETS = ("The secret (an HMAC key, an SMTP password, a bot token, a device key, a service's "
           "token or webhook URL) is "
           "write-only: no answer carries it, only whether one is set.")

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", N + "/channels", list_channels, "List notification channels with their "
             "rules (secrets show as set or not set)", "notify", Level.READ,
             response=views.ChannelView, many=True),
    Endpoint("POST", N + "/channels", put_channel, "Add a notification channel (replace: "
             "change an existing one; 201 when added, 200 when replaced)", "notify",
             Level.ADMIN, body=rq.ChannelRequest, response=views.ChannelView, status=201,
             also=(200,), description=SECRETS),
    Endpoint("GET", C, show_channel, "Show a notification channel and its rules", "notify",
             Level.READ, response=views.ChannelView),
    Endpoint("DELETE", C, remove_channel, "Remove a channel and its rules; its secret is "
             "erased and deliveries still waiting for it are not sent", "notify", Level.ADMIN,
             response=views.ChannelView),
    Endpoint("POST", C + "/test", send_test, "Send a test notification now (event "
             "notify.test, not through the outbox) and say what the receiver answered",
             "notify", Level.OPERATE, body=rq.Empty, response=views.NotifyTestView,
             description="200 either way: delivered says whether the receiver accepted it "
                         "(the send is bounded by the channel's timeout).",
             atomic=False),  # no transaction held open while the receiver answers
    Endpoint("GET", N + "/rules", list_rules, "List notification rules", "notify", Level.READ,
             response=views.RuleView, many=True,
             query=(Query("channel", "str", "Only this channel"),
                    Query("project", "str", "Only this project"))),
    Endpoint("POST", N + "/rules", add_rule, "Tell a channel about events of a project (or of "
             "one task); a rule covers what happens after it was added", "notify",
             Level.ADMIN, body=rq.RuleRequest, response=views.RuleView, many=True, status=201),
    Endpoint("POST", N + "/rules/remove", remove_rule, "Stop telling a channel about a "
             "project (or task): the whole rule, or some events", "notify", Level.ADMIN,
             body=rq.RuleRequest, response=views.RuleRemovedView),
    Endpoint("GET", N + "/deliveries", list_deliveries, "The outbox, newest first: each "
             "notification for each channel with its status, attempts and last error",
             "notify", Level.READ, response=views.DeliveryView, many=True,
             query=(Query("status", "choice", "Only this status",
                          choices=tuple(status.value for status in DeliveryStatus)),
                    Query("channel", "str", "Only this channel"),
                    Query("limit", "int", "How many", 1, MAX_LIST, default=50))),
    Endpoint("POST", N + "/deliveries/{delivery}/retry", retry_delivery, "Send a dead "
             "delivery again from its first attempt (its id, or the start of it)", "notify",
             Level.OPERATE, body=rq.Empty, response=views.DeliveryView),
)
