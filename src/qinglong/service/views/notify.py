"""The JSON shapes of channels, rules, deliveries and a test send (``ql notify ... --json``
and the /api/v1/notify routes).

A channel's secret never appears: only whether one is set (``"secret": "set"`` or
``"not set"``). Instants appear as RFC 3339 (``*_at``) and epoch milliseconds (``*_at_ms``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from qinglong.domain.notify.channels import EmailTarget, TemplateTarget, WebhookTarget
from qinglong.domain.notify.model import Channel, Delivery, Rule
from qinglong.domain.notify.services import ServiceTarget
from qinglong.service.notifications import SentTest
from qinglong.service.times import rfc3339
from qinglong.service.views.base import Instant, OptionalInstant, ViewModel, instant, one_of

SECRET_SET, SECRET_NOT_SET = "set", "not set"


class WebhookView(ViewModel):
    url: str
    headers: list[str] = Field(description="'Name: value'")
    signed: bool = Field(description="Signed with the secret (HMAC)")


class EmailView(ViewModel):
    smtp_host: str
    smtp_port: int
    smtp_security: Annotated[str, one_of("starttls", "tls", "none")]
    smtp_user: str | None
    from_: str = Field(serialization_alias="from")
    to: list[str]


class TemplateView(ViewModel):
    url: str
    method: Annotated[str, one_of("POST", "PUT", "GET")]
    body: Any
    content_type: str
    headers: list[str]
    params: dict[str, str]
    preset: str | None


class ServiceView(ViewModel):
    service: Annotated[str, one_of("dingtalk", "feishu", "wecom", "serverchan", "pushplus",
                                   "ntfy", "gotify", "slack", "discord")]
    params: dict[str, str] = Field(description="server, topic, priority (never the secret)")


class RuleView(ViewModel):
    channel: str
    project: str
    task: str | None
    events: list[str]
    unplaceable_after_ms: int | None = Field(
        description="With the unplaceable event: how long a queued Run no live worker can "
                    "take waits before it is reported (null: the rule does not ask for it)")
    running_long_after_ms: int | None = Field(
        default=None, description="With the running_long event: how long a Run's attempt "
                                  "runs before it is reported (null: not asked for)")
    late_start_after_ms: int | None = Field(
        default=None, description="With the late_start event: how long after its scheduled "
                                  "time a Run not started is reported (null: not asked for)")
    created_at: Instant
    created_at_ms: int


class ChannelRetryView(ViewModel):
    max_attempts: int
    backoff_ms: int
    max_backoff_ms: int


class ChannelView(ViewModel):
    name: str
    kind: Annotated[str, one_of("webhook", "email", "template", "service")]
    target: str
    webhook: WebhookView | None = Field(default=None, description="A webhook channel's target")
    email: EmailView | None = Field(default=None, description="An email channel's target")
    template: TemplateView | None = Field(default=None,
                                          description="A template channel's target")
    service: ServiceView | None = Field(default=None, description="A service channel's target")
    secret: Annotated[str, one_of(SECRET_SET, SECRET_NOT_SET)] = Field(description="Whether a secret is stored (never "
                                                          "its value)")
    timeout_ms: int
    retry: ChannelRetryView
    version: int
    created_at: Instant
    updated_at: Instant
    rules: list[RuleView] | None = None
    removed: bool | None = None


class RuleRemovedView(ViewModel):
    removed: int = Field(description="How many (channel, project, task, event) rows")


class NotifyTestView(ViewModel):
    channel: str
    id: str
    event: str
    delivered: bool
    status: int | None
    detail: str
    elapsed_ms: int


class DeliveryView(ViewModel):
    id: str
    channel: str
    event: str
    status: Annotated[str, one_of("pending", "sending", "delivered", "dead")]
    attempts: int
    max_attempts: int
    next_attempt_at: OptionalInstant
    next_attempt_at_ms: int | None
    last_status: int | None
    last_error: str | None
    project: str
    task: str | None
    trigger: str | None
    run: str | None
    source: str
    occurred_at: Instant
    occurred_at_ms: int
    created_at: Instant
    created_at_ms: int
    finished_at: OptionalInstant
    finished_at_ms: int | None


def _headers(pairs: Sequence[tuple[str, str]]) -> list[str]:
    return [f"{name}: {value}" for name, value in pairs]


def target_view(channel: Channel) -> WebhookView | EmailView | TemplateView | ServiceView:
    target = channel.spec.target
    if isinstance(target, WebhookTarget):
        return WebhookView(url=target.url, headers=_headers(target.headers),
                           signed=channel.secret_set)
    if isinstance(target, EmailTarget):
        return EmailView(smtp_host=target.host, smtp_port=target.effective_port,
                         smtp_security=target.security.value, smtp_user=target.username,
                         from_=target.sender, to=list(target.recipients))
    if isinstance(target, ServiceTarget):
        return ServiceView(service=target.service, params=dict(target.params))
    assert isinstance(target, TemplateTarget)
    return TemplateView(url=target.url, method=target.method.value, body=target.body,
                        content_type=target.content_type, headers=_headers(target.headers),
                        params=dict(target.params), preset=target.preset)


def rule_view(rule: Rule) -> RuleView:
    return RuleView(channel=rule.channel, project=rule.project_id, task=rule.task_id,
                    events=[event.value for event in rule.events],
                    unplaceable_after_ms=rule.unplaceable_after_ms,
                    running_long_after_ms=rule.running_long_after_ms,
                    late_start_after_ms=rule.late_start_after_ms,
                    created_at=instant(rule.created_at_ms), created_at_ms=rule.created_at_ms)


def channel_view(channel: Channel, rules: Sequence[Rule] | None = None) -> ChannelView:
    spec = channel.spec
    more: dict[str, Any] = {spec.kind.value: target_view(channel)}
    if rules is not None:
        more["rules"] = [rule_view(rule) for rule in rules]
    return ChannelView(
        name=spec.name, kind=spec.kind.value, target=spec.target.shown,
        secret=SECRET_SET if channel.secret_set else SECRET_NOT_SET,
        timeout_ms=spec.timeout_ms,
        retry=ChannelRetryView(max_attempts=spec.retry.max_attempts,
                               backoff_ms=spec.retry.backoff_ms,
                               max_backoff_ms=spec.retry.max_backoff_ms),
        version=channel.version, created_at=instant(channel.created_at_ms),
        updated_at=instant(channel.updated_at_ms), **more)


def delivery_view(delivery: Delivery) -> DeliveryView:
    return DeliveryView(
        id=delivery.id, channel=delivery.channel, event=delivery.event,
        status=delivery.status.value, attempts=delivery.attempts,
        max_attempts=delivery.max_attempts,
        next_attempt_at=rfc3339(delivery.next_attempt_at_ms),
        next_attempt_at_ms=delivery.next_attempt_at_ms, last_status=delivery.last_status,
        last_error=delivery.last_error, project=delivery.project_id, task=delivery.task_id,
        trigger=delivery.trigger_id, run=delivery.run_id, source=delivery.source_key,
        occurred_at=instant(delivery.occurred_at_ms),
        occurred_at_ms=delivery.occurred_at_ms, created_at=instant(delivery.created_at_ms),
        created_at_ms=delivery.created_at_ms, finished_at=rfc3339(delivery.finished_at_ms),
        finished_at_ms=delivery.finished_at_ms)


def sent_test_view(sent: SentTest) -> NotifyTestView:
    return NotifyTestView(channel=sent.channel, id=sent.id, event=sent.event,
                          delivered=sent.delivered, status=sent.status, detail=sent.detail,
                          elapsed_ms=sent.elapsed_ms)
