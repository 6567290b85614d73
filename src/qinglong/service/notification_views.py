"""The JSON shapes of channels, rules, deliveries and a test send (``ql notify ... --json``
and the /api/v1/notify routes).

A channel's secret never appears: only whether one is set (``"secret": "set"`` or
``"not set"``). Instants appear as RFC 3339 (``*_at``) and epoch milliseconds (``*_at_ms``).
"""

from __future__ import annotations

from collections.abc import Sequence

from qinglong.domain.notify.channels import EmailTarget, TemplateTarget, WebhookTarget
from qinglong.domain.notify.model import Channel, Delivery, Rule
from qinglong.service.notifications import SentTest
from qinglong.service.times import rfc3339

View = dict[str, object]
SECRET_SET, SECRET_NOT_SET = "set", "not set"


def target_view(channel: Channel) -> View:
    target = channel.spec.target
    if isinstance(target, WebhookTarget):
        return {"url": target.url,
                "headers": [f"{name}: {value}" for name, value in target.headers],
                "signed": channel.secret_set}
    if isinstance(target, EmailTarget):
        return {"smtp_host": target.host, "smtp_port": target.effective_port,
                "smtp_security": target.security.value, "smtp_user": target.username,
                "from": target.sender, "to": list(target.recipients)}
    assert isinstance(target, TemplateTarget)
    return {"url": target.url, "method": target.method.value, "body": target.body,
            "content_type": target.content_type,
            "headers": [f"{name}: {value}" for name, value in target.headers],
            "params": dict(target.params), "preset": target.preset}


def rule_view(rule: Rule) -> View:
    return {"channel": rule.channel, "project": rule.project_id, "task": rule.task_id,
            "events": [event.value for event in rule.events],
            "created_at": rfc3339(rule.created_at_ms), "created_at_ms": rule.created_at_ms}


def channel_view(channel: Channel, rules: Sequence[Rule] | None = None) -> View:
    spec = channel.spec
    view: View = {
        "name": spec.name,
        "kind": spec.kind.value,
        "target": spec.target.shown,
        spec.kind.value: target_view(channel),
        "secret": SECRET_SET if channel.secret_set else SECRET_NOT_SET,
        "timeout_ms": spec.timeout_ms,
        "retry": {"max_attempts": spec.retry.max_attempts, "backoff_ms": spec.retry.backoff_ms,
                  "max_backoff_ms": spec.retry.max_backoff_ms},
        "version": channel.version,
        "created_at": rfc3339(channel.created_at_ms),
        "updated_at": rfc3339(channel.updated_at_ms),
    }
    if rules is not None:
        view["rules"] = [rule_view(rule) for rule in rules]
    return view


def delivery_view(delivery: Delivery) -> View:
    return {
        "id": delivery.id,
        "channel": delivery.channel,
        "event": delivery.event,
        "status": delivery.status.value,
        "attempts": delivery.attempts,
        "max_attempts": delivery.max_attempts,
        "next_attempt_at": rfc3339(delivery.next_attempt_at_ms),
        "next_attempt_at_ms": delivery.next_attempt_at_ms,
        "last_status": delivery.last_status,
        "last_error": delivery.last_error,
        "project": delivery.project_id,
        "task": delivery.task_id,
        "trigger": delivery.trigger_id,
        "run": delivery.run_id,
        "source": delivery.source_key,
        "occurred_at": rfc3339(delivery.occurred_at_ms),
        "occurred_at_ms": delivery.occurred_at_ms,
        "created_at": rfc3339(delivery.created_at_ms),
        "created_at_ms": delivery.created_at_ms,
        "finished_at": rfc3339(delivery.finished_at_ms),
        "finished_at_ms": delivery.finished_at_ms,
    }


def sent_test_view(sent: SentTest) -> View:
    return {"channel": sent.channel, "id": sent.id, "event": sent.event,
            "delivered": sent.delivered, "status": sent.status, "detail": sent.detail,
            "elapsed_ms": sent.elapsed_ms}
