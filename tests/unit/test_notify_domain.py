"""Notifications, the pure parts: events, channel specs and their validation, templates,
presets, the retry backoff, the document's shape and the webhook signature."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from qinglong.domain.notify import payload, signing, templates
from qinglong.domain.notify.channels import (
    ChannelSpec,
    EmailTarget,
    HttpMethod,
    RetryPolicy,
    SmtpSecurity,
    TemplateTarget,
    WebhookTarget,
    check_http_url,
    parse_header,
    spec_from_stored,
)
from qinglong.domain.notify.events import DEFAULT_EVENTS, RuleEvent, parse_events
from qinglong.domain.notify.payload import MisfireFacts, NotifyEvent, RunFacts
from qinglong.domain.notify.presets import preset_target
from qinglong.errors import InvalidInput, RecordCorrupt

# --- events ---------------------------------------------------------------------------------


def test_events_parse_from_lists_and_commas_in_a_stable_order() -> None:
    assert parse_events(["lost,failed", "misfired"]) == (
        RuleEvent.FAILED, RuleEvent.LOST, RuleEvent.MISFIRED)
    assert parse_events(["all"]) == tuple(RuleEvent)
    assert RuleEvent.CANCELLED not in DEFAULT_EVENTS  # cancellations are asked for explicitly
    assert RuleEvent.UNPLACEABLE in DEFAULT_EVENTS  # a failure-class signal
    assert [e.wire for e in RuleEvent] == ["run.failed", "run.timed_out", "run.lost",
                                           "run.cancelled", "trigger.misfired",
                                           "trigger.recovered", "run.unplaceable",
                                           "run.started", "run.succeeded", "run.running_long",
                                           "run.late_start"]
    for opt_in in ("started", "succeeded", "running_long", "late_start"):  # issue 22
        assert RuleEvent(opt_in) not in DEFAULT_EVENTS


@pytest.mark.parametrize("given", [["faild"], ["failed,nope"], [""], [" , "]])
def test_an_unknown_or_missing_event_is_refused_naming_the_choices(given: list[str]) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_events(given)
    assert caught.value.field == "events"
    assert ("failed, timed_out, lost, cancelled, misfired, recovered, unplaceable"
            in caught.value.rule)


# --- channel specs ------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["ftp://x.example/", "http://", "example.com/hook",
                                 "https://user:pw@example.com/", "https://x.example/#frag",
                                 "https://x.example/a b", "http://x.example:99999/"])
def test_a_bad_webhook_url_is_refused(url: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        WebhookTarget(url=url)
    assert caught.value.field == "url"


def test_headers_are_parsed_and_qinglongs_own_are_refused() -> None:
    assert parse_header("Authorization: Bearer x") == ("Authorization", "Bearer x")
    assert parse_header("X-Team=ops") == ("X-Team", "ops")
    with pytest.raises(InvalidInput, match="set by qinglong"):
        WebhookTarget(url="https://x.example/", headers=(("X-Qinglong-Signature", "v1=0"),))
    with pytest.raises(InvalidInput, match="one line"):
        WebhookTarget(url="https://x.example/", headers=(("X-A", "a\r\nX-B: b"),))


def test_an_email_target_checks_host_addresses_and_knows_its_port() -> None:
    target = EmailTarget(host="smtp.example.com", sender="ql@example.com",
                         recipients=("a@example.com",))
    assert target.effective_port == 587
    assert EmailTarget(host="smtp.example.com", sender="ql@example.com",
                       recipients=("a@example.com",), security=SmtpSecurity.TLS).effective_port == 465
    for field, kwargs in (("from", {"sender": "not-an-address"}),
                          ("to", {"recipients": ("x@y", "bad address")}),
                          ("to", {"recipients": ()}),
                          ("smtp-host", {"host": "smtp example"})):
        values = {"host": "smtp.example.com", "sender": "ql@example.com",
                  "recipients": ("a@example.com",), **kwargs}
        with pytest.raises(InvalidInput) as caught:
            EmailTarget(**values)  # type: ignore[arg-type]
        assert caught.value.field == field


def test_a_template_may_only_use_known_placeholders_and_must_yield_an_http_url() -> None:
    ok = TemplateTarget(url="https://chat.example.com/{project}?t={secret}",
                        body={"text": "{title}: {summary} {{literal}}"})
    assert ok.uses_secret
    with pytest.raises(InvalidInput, match=r"unknown placeholder \{projct\}"):
        TemplateTarget(url="https://chat.example.com/{projct}")
    with pytest.raises(InvalidInput, match="lone"):
        TemplateTarget(url="https://chat.example.com/", body={"text": "a { b"})
    with pytest.raises(InvalidInput) as caught:
        TemplateTarget(url="{summary}")
    assert caught.value.field == "url"
    with pytest.raises(InvalidInput, match="GET request has no body"):
        TemplateTarget(url="https://x.example/", method=HttpMethod.GET, body={"a": "b"})
    with pytest.raises(InvalidInput, match="not a parameter name"):
        TemplateTarget(url="https://x.example/", params=(("summary", "x"),))


def test_presets_are_templates_with_the_secret_in_its_place() -> None:
    telegram = preset_target("telegram", {"chat_id": "-100123"})
    assert telegram.url == "https://api.telegram.org/bot{secret}/sendMessage"
    assert telegram.uses_secret and telegram.preset == "telegram"
    with pytest.raises(InvalidInput, match="chat_id"):
        preset_target("telegram", {})
    bark = preset_target("bark", {"server": "https://bark.example.com/"})
    assert bark.url == "https://bark.example.com/push"
    assert bark.body["device_key"] == "{secret}" and dict(bark.params) == {"group": "qinglong"}
    with pytest.raises(InvalidInput, match="unknown preset"):
        preset_target("slack", {})


@pytest.mark.parametrize("target", [
    WebhookTarget(url="https://x.example/h", headers=(("X-Team", "ops"),)),
    EmailTarget(host="smtp.example.com", port=2525, security=SmtpSecurity.NONE, username="u",
                sender="ql@example.com", recipients=("a@example.com", "b@example.com")),
    preset_target("bark", {}),
    TemplateTarget(url="https://x.example/{task}", method=HttpMethod.PUT, body=[{"k": "{event}"}],
                   content_type="application/vnd.x+json", params=(("room", "7"),)),
], ids=["webhook", "email", "bark", "template"])
def test_a_spec_survives_its_stored_form(target: WebhookTarget | EmailTarget | TemplateTarget
                                         ) -> None:
    spec = ChannelSpec(name="ops", target=target, timeout_ms=3_000,
                       retry=RetryPolicy(max_attempts=5, backoff_ms=500, max_backoff_ms=9_000))
    stored = spec.config_json()
    assert spec_from_stored("ops", spec.kind.value, stored) == spec
    assert spec_from_stored("ops", spec.kind.value, json.loads(stored)) == spec  # jsonb


def test_a_stored_spec_this_version_cannot_read_is_record_corrupt() -> None:
    with pytest.raises(RecordCorrupt, match="'ops'"):
        spec_from_stored("ops", "webhook", '{"target": {"url": "gopher://x"}}')
    with pytest.raises(RecordCorrupt):
        spec_from_stored("ops", "pigeon", "{}")


def test_the_backoff_doubles_up_to_its_cap_within_the_jitter() -> None:
    policy = RetryPolicy(max_attempts=10, backoff_ms=1_000, max_backoff_ms=5_000)
    assert [policy.delay_ms(n, 1.0) for n in range(1, 6)] == [1000, 2000, 4000, 5000, 5000]
    assert policy.delay_ms(2, 0.8) == 1600 and policy.delay_ms(2, 1.2) == 2400
    assert policy.delay_ms(10_000, 1.0) == 5000  # no overflow far out
    with pytest.raises(InvalidInput) as caught:
        RetryPolicy(backoff_ms=10_000, max_backoff_ms=1_000)
    assert caught.value.field == "retry-max-backoff"
    with pytest.raises(InvalidInput):
        RetryPolicy(max_attempts=0)


def test_url_checks_name_the_field_they_were_given() -> None:
    with pytest.raises(InvalidInput) as caught:
        check_http_url("nope", "param")
    assert caught.value.field == "param"


# --- templates ----------------------------------------------------------------------------


def test_values_cannot_change_the_shape_of_a_url_or_a_body() -> None:
    values = {"project": "a/b?c=d#e", "summary": 'said "hi"}, "x": {'}
    assert templates.render_url("https://h.example/{project}", values) == \
        "https://h.example/a%2Fb%3Fc%3Dd%23e"
    body = templates.render_body({"text": "{summary}", "n": 1, "l": ["{project}"]}, values)
    assert body == {"text": 'said "hi"}, "x": {', "n": 1, "l": ["a/b?c=d#e"]}
    assert json.loads(json.dumps(body)) == body
    assert templates.render_text("{{x}} {project}", values) == "{x} a/b?c=d#e"


# --- the document -------------------------------------------------------------------------

RUN = RunFacts(id="r1", status="failed", task_name="Backup", origin="scheduled_system",
               requested_by=None, scheduled_for_ms=1_799_913_600_000,
               created_at_ms=1_799_913_600_010, started_at_ms=1_799_913_600_020,
               finished_at_ms=1_799_913_601_000, attempts=2, exit_code=3,
               error_code="EXIT_NONZERO", error_summary="disk full", cancel_reason=None)


def test_the_document_has_every_key_of_its_version() -> None:
    event = NotifyEvent(event="run.failed", source_key="run.failed:r1",
                        occurred_at_ms=1_799_913_601_000, project_id="demo", task_id="backup",
                        trigger_id="nightly", run=RUN)
    doc = payload.build(event, delivery_id="d1", channel="ops")
    assert set(doc) == {"schema", "id", "event", "channel", "occurred_at", "occurred_at_ms",
                        "project", "task", "trigger", "title", "summary", "run", "misfire",
                        "recovery", "placement", "deadline"}
    assert doc["placement"] is None  # only run.unplaceable has one
    assert doc["deadline"] is None  # only run.running_long and run.late_start have one
    assert doc["schema"] == "qinglong/notification@v1" and doc["id"] == "d1"
    assert doc["occurred_at"] == "2027-01-14T08:00:01.000Z"
    assert doc["title"] == "qinglong: demo/backup failed"
    assert "exit 3" in doc["summary"] and "2 attempts" in doc["summary"]
    assert "disk full" in doc["summary"]
    assert doc["run"]["exit_code"] == 3 and doc["misfire"] is None and doc["recovery"] is None
    raw = payload.body(doc)
    assert raw == json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    values = payload.template_values(doc, secret="s3", params={"room": "7"})
    assert (values["status"], values["error"], values["run_id"], values["secret"],
            values["room"]) == ("failed", "disk full", "r1", "s3", "7")
    assert set(templates.EVENT_FIELDS) <= set(values)


def test_a_misfire_document_says_what_was_dropped() -> None:
    event = NotifyEvent(
        event="trigger.misfired", source_key="trigger.misfired:demo/t@1:0",
        occurred_at_ms=1_799_913_700_000, project_id="demo", task_id="backup", trigger_id="t",
        misfire=MisfireFacts(trigger_revision=1, policy="skip", due_at_ms=1_799_913_600_000,
                             skipped_through_ms=1_799_913_640_000,
                             next_fire_at_ms=1_799_913_670_000, run_id=None,
                             decided_at_ms=1_799_913_700_000))
    doc = payload.build(event, delivery_id="d2", channel="ops")
    assert doc["title"] == "qinglong: trigger demo/t misfired"
    assert "policy skip" in doc["summary"] and "2027-01-14T08:00:00.000Z" in doc["summary"]
    assert doc["run"] is None and doc["misfire"]["next_fire_at_ms"] == 1_799_913_670_000


# --- signatures ---------------------------------------------------------------------------


def test_a_signature_verifies_and_nothing_else_does() -> None:
    body = b'{"id":"d1"}'
    header = signing.signature("k3y", 1_000_000, body)
    expected = hmac.new(b"k3y", b"1000000." + body, hashlib.sha256).hexdigest()
    assert header == "v1=" + expected  # the documented construction
    ok = {"timestamp": "1000000", "signature_header": header, "body": body}
    assert signing.verify("k3y", now_s=1_000_100, **ok)  # type: ignore[arg-type]
    assert signing.verify("k3y", now_s=1_000_000, timestamp="1000000",
                          signature_header="v0=zz, " + header, body=body)  # rotation lists
    assert not signing.verify("other", now_s=1_000_000, **ok)  # type: ignore[arg-type]
    assert not signing.verify("k3y", now_s=1_000_000, timestamp="1000000",
                              signature_header=header, body=body + b" ")
    assert not signing.verify("k3y", now_s=1_000_000, timestamp="1000001",
                              signature_header=header, body=body)  # a moved timestamp
    assert not signing.verify("k3y", now_s=1_000_301, **ok)  # type: ignore[arg-type]
    assert not signing.verify("k3y", now_s=1_000_000, timestamp="x",
                              signature_header=header, body=body)
