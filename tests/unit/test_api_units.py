"""The HTTP API's pure parts: cursors, per-day stats folding, previews, query and body
reading, problems and their statuses, scopes and roles, the bind rule, the OpenAPI document."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from openapi_spec_validator import validate

from qinglong.errors import (
    BadRequest,
    Forbidden,
    InvalidInput,
    NotFound,
    RateLimited,
    Unauthenticated,
)
from qinglong.service.accounts import (
    Level,
    Principal,
    check_password,
    check_username,
    csrf_matches,
    csrf_token_for,
)
from qinglong.service.preview import schedule_preview
from qinglong.service.run_pages import decode_cursor, encode_cursor
from qinglong.service.stats import TaskStats
from qinglong.storage.runs.params import RunBucket, RunBucketParams, RunPageParams
from qinglong.web.app import api_endpoints
from qinglong.web.openapi import build_openapi, operation_id
from qinglong.web.problems import problem_body, status_for
from qinglong.web.requests import BackfillRequest, ChannelRequest, TaskPublishRequest
from qinglong.web.routing import Query, read_body, read_instant, read_query
from qinglong.web.server import check_bind, is_loopback

# --- cursors -----------------------------------------------------------------------------------


def test_a_cursor_round_trips_and_refuses_the_other_order_and_forgeries() -> None:
    cursor = encode_cursor(1_799_913_600_000, "0f0e-run", oldest_first=False)
    assert decode_cursor(cursor, oldest_first=False) == (1_799_913_600_000, "0f0e-run")
    with pytest.raises(InvalidInput, match="other order"):
        decode_cursor(cursor, oldest_first=True)
    for forged in ("", "x", cursor[:-2], "WzEsMiwzXQ", "WzEsInQiLCJpZCIsImRlc2MiXQ"):
        with pytest.raises(InvalidInput) as caught:
            decode_cursor(forged, oldest_first=False)
        assert caught.value.field == "cursor"


# --- stats -------------------------------------------------------------------------------------


class _Buckets:
    def __init__(self, buckets: list[RunBucket]) -> None:
        self.buckets = buckets
        self.asked: list[RunBucketParams] = []

    def run_page(self, params: RunPageParams) -> list[object]:
        raise AssertionError("not used")

    def run_buckets(self, params: RunBucketParams) -> list[RunBucket]:
        self.asked.append(params)
        return [b for b in self.buckets if params.from_ms <= b.bucket_start_ms < params.to_ms]


def _bucket(at_ms: int, task: str = "t", runs: int = 1, ok: int = 1, longest: int = 100) -> RunBucket:
    return RunBucket(task_id=task, bucket_start_ms=at_ms, runs=runs, succeeded=ok,
                     failed=runs - ok, cancelled=0, total_duration_ms=longest * runs,
                     max_duration_ms=longest)


def test_stats_fold_quarter_hours_into_local_days_across_a_dst_change() -> None:
    # 2026-03-08 is 23 hours long in New York (the clocks jump from 02:00 to 03:00 EST->EDT).
    midnight_8th = 1_772_946_000_000  # 2026-03-08T00:00:00-05:00
    midnight_9th = 1_773_028_800_000  # 2026-03-09T00:00:00-04:00 (23 h later)
    store = _Buckets([
        _bucket(midnight_8th - 900_000, longest=50),  # 23:45 on the 7th
        _bucket(midnight_8th, runs=2, ok=1, longest=300),
        _bucket(midnight_9th - 900_000, longest=70),  # 23:45 on the 8th, after the change
        _bucket(midnight_9th, task="u", runs=3, ok=3, longest=10),
    ])
    view = TaskStats(store).per_day("demo", now_ms=midnight_9th + 3_600_000,
                                    from_day="2026-03-07", to_day="2026-03-09",
                                    timezone="America/New_York").to_json()
    assert store.asked[0].bucket_ms == 900_000
    assert [(d["task"], d["date"], d["runs"], d["successes"], d["failures"],
             d["max_duration_ms"]) for d in view["days"]] == [  # type: ignore[union-attr]
        ("t", "2026-03-07", 1, 1, 0, 50), ("t", "2026-03-08", 3, 2, 1, 300),
        ("u", "2026-03-09", 3, 3, 0, 10)]
    assert view["totals"] == [
        {"task": "t", "runs": 4, "successes": 3, "failures": 1, "cancelled": 0, "skipped": 0,
         "total_duration_ms": 50 + 600 + 70, "max_duration_ms": 300, "success_rate": 0.75},
        {"task": "u", "runs": 3, "successes": 3, "failures": 0, "cancelled": 0, "skipped": 0,
         "total_duration_ms": 30, "max_duration_ms": 10, "success_rate": 1.0}]


def test_stats_default_to_the_last_seven_utc_days_and_refuse_long_windows() -> None:
    store = _Buckets([])
    view = TaskStats(store).per_day("demo", now_ms=1_799_913_600_000).to_json()  # 2027-01-14
    assert (view["from"], view["to"], view["days"]) == ("2027-01-08", "2027-01-14", [])
    assert store.asked[0].bucket_ms == 86_400_000
    assert store.asked[0].to_ms - store.asked[0].from_ms == 7 * 86_400_000
    for given, field in (({"from_day": "2026-01-01", "to_day": "2027-12-31"}, "from"),
                         ({"from_day": "2027-01-09", "to_day": "2027-01-08"}, "from"),
                         ({"to_day": "2027-02-30"}, "to")):
        with pytest.raises(InvalidInput) as caught:
            TaskStats(store).per_day("demo", now_ms=1_799_913_600_000, **given)  # type: ignore[arg-type]
        assert caught.value.field == field


# --- preview -----------------------------------------------------------------------------------


def test_a_preview_marks_the_dst_gap_and_overlap() -> None:
    spring = schedule_preview("30 2 * * *", "Europe/Berlin", count=3,
                              after_ms=1_774_569_600_000).to_json()  # 2026-03-27T00:00Z
    marks = [(o["local"], o["dst"]) for o in spring["occurrences"]]  # type: ignore[union-attr]
    assert marks[2] == ("2026-03-29T03:00:00+02:00", "gap-shifted")
    autumn = schedule_preview("30 2 * * *", "Europe/Berlin", count=3,
                              after_ms=1_792_713_600_000).to_json()  # 2026-10-23T00:00Z
    assert [o["dst"] for o in autumn["occurrences"]][-1] == "overlap-first"  # type: ignore[index]
    assert (spring["kind"], spring["cron"], spring["timezone"]) == (
        "cron", "30 2 * * *", "Europe/Berlin")
    with pytest.raises(InvalidInput):
        schedule_preview("30 2 * * *", "UTC", count=0, after_ms=0)
    with pytest.raises(InvalidInput):
        schedule_preview("61 * * * *", "UTC", count=1, after_ms=0)


# --- reading requests ------------------------------------------------------------------------------


def test_query_parameters_are_read_strictly() -> None:
    [endpoint] = [e for e in api_endpoints() if (e.method, e.path) == ("GET", "/api/v1/runs")]
    read = read_query(endpoint, {"limit": "5", "order": "oldest", "since": "2026-12-01T00:00:00Z"},
                      ["limit", "order", "since"])
    assert (read["limit"], read["order"], read["since"], read["cursor"]) == (
        5, "oldest", 1_796_083_200_000, None)
    for params, field in (({"limit": "0"}, "limit"), ({"limit": "1.5"}, "limit"),
                          ({"order": "random"}, "order"), ({"since": "now"}, "since"),
                          ({"colour": "red"}, "colour")):
        with pytest.raises(InvalidInput) as caught:
            read_query(endpoint, params, list(params))
        assert caught.value.field == field
    with pytest.raises(InvalidInput, match="more than once"):
        read_query(endpoint, {"limit": "1"}, ["limit", "limit"])
    assert Query("x", "bool", "").read("1") is True
    assert read_instant(1000, "at") == 1000
    for bad in ("2026-12-01T00:00:00", True, -1, 10**16):
        with pytest.raises(InvalidInput):
            read_instant(bad, "at")


def test_bodies_are_json_objects_of_known_fields_with_their_own_types() -> None:
    ok = read_body(TaskPublishRequest, "application/json; charset=utf-8",
                   b'{"command": {"kind": "argv", "argv": ["/bin/true"]}, "concurrency": null}')
    assert isinstance(ok, TaskPublishRequest) and "concurrency" in ok.model_fields_set
    assert read_body(TaskPublishRequest, None, b"  ").model_fields_set == set()
    with pytest.raises(BadRequest):
        read_body(TaskPublishRequest, "application/json", b"{nope")
    cases = [(b'{"timeout_ms": "10"}', "timeout_ms"), (b'{"colour": 1}', "colour"),
             (b'{"command": {"kind": "shell"}}', "command.command"),
             (b'{"command": {"kind": "argv", "argv": [1]}}', "command.argv.0"),
             (b'{"retry": {"max_attempts": true}}', "retry.max_attempts"), (b"[]", "body")]
    for raw, field in cases:
        with pytest.raises(InvalidInput) as caught:
            read_body(TaskPublishRequest, "application/json", raw)
        assert caught.value.field == field, (raw, caught.value.field)


# --- problems, scopes, binding -----------------------------------------------------------------


def test_problems_carry_their_status_and_the_api_field_name() -> None:
    assert [status_for(e) for e in (Unauthenticated(), Forbidden(), RateLimited("x", 3),
                                    BadRequest(), NotFound("run", "x"))] == [
        401, 403, 429, 400, 404]
    body = problem_body(InvalidInput("working-directory", "must be absolute"))
    assert (body["status"], body["field"], body["detail"], body["type"]) == (
        422, "working_directory", "working_directory: must be absolute",
        "urn:qinglong:error:QL_INVALID_INPUT")
    assert problem_body(InvalidInput("command.args[2]", "x"))["field"] == "command.argv"


def test_a_token_scope_narrows_its_users_role() -> None:
    admin_read = Principal(username="a", role="admin", via="token", token_id="t", scope="read")
    assert admin_read.level is Level.READ and admin_read.effective_scope == "read"
    with pytest.raises(Forbidden, match="operate"):
        admin_read.require(Level.OPERATE)
    viewer_admin = Principal(username="v", role="viewer", via="token", scope="admin")
    assert viewer_admin.level is Level.READ  # a token never widens a role
    Principal(username="o", role="operator", via="session").require(Level.OPERATE)
    assert csrf_matches("secret", csrf_token_for("secret"))
    assert not csrf_matches("secret", csrf_token_for("other"))
    for bad in ("Admin", "a b", "", "x" * 65, "-lead"):
        with pytest.raises(InvalidInput):
            check_username(bad)
    with pytest.raises(InvalidInput):
        check_password("short")
    with pytest.raises(InvalidInput):
        check_password("ten chars\x00!")


def test_the_api_binds_to_loopback_unless_allowed() -> None:
    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "127.9.9.9")] == [True] * 4
    assert [is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "::", "example.com")] == [False] * 4
    assert check_bind("127.0.0.1:8080", False) == ("127.0.0.1", 8080)
    assert check_bind("[::1]:0", False) == ("::1", 0)
    with pytest.raises(InvalidInput, match="allow-remote"):
        check_bind("0.0.0.0:8080", False)
    assert check_bind("0.0.0.0:8080", True) == ("0.0.0.0", 8080)


def test_the_openapi_document_is_valid_with_unique_operations() -> None:
    endpoints = api_endpoints()
    document = build_openapi(endpoints)
    validate(document)  # type: ignore[arg-type]
    ids = [operation_id(e) for e in endpoints]
    assert len(ids) == len(set(ids))
    schemas = document["components"]["schemas"]  # type: ignore[index]
    task_view = schemas["TaskView"]
    assert "environment" in task_view["properties"]
    # no response schema has a place for a task's environment value; a project
    # environment's entry shows a plain value and never a secret's (docs/controls/
    # environments.md), and its request is where a value goes in
    assert [name for name, s in schemas.items() if "value" in s.get("properties", {})] == [
        "EnvEntryView", "EnvSetRequest"]


def test_docs_api_lists_every_route_with_its_scope() -> None:
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    for endpoint in api_endpoints():
        scope = "-" if endpoint.level is None else endpoint.level.name.lower()
        row = f"| `{endpoint.method} {endpoint.path}` | {scope} |"
        assert row in text, row


def test_instants_are_read_to_the_exact_millisecond() -> None:
    # integer arithmetic: a backfill window sent as RFC 3339 starts exactly where it says
    for millis in (1_796_111_111_123, 1_764_576_000_001, 253_402_300_799_999, 0):
        at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=millis)  # no float
        text = at.isoformat(timespec="milliseconds")
        assert read_instant(text.replace("+00:00", "Z"), "from") == millis
    assert read_instant("2026-12-01T08:00:00.123+08:00", "to") == 1_796_083_200_123


def test_backfill_and_notification_routes_have_their_scopes() -> None:
    scopes = {(e.method, e.path): e.level for e in api_endpoints()}
    n = "/api/v1/notify"
    assert {key: scopes[key] for key in (
        ("POST", "/api/v1/projects/{project}/triggers/{trigger}/backfill"),
        ("GET", f"{n}/channels"), ("POST", f"{n}/channels"), ("GET", f"{n}/channels/{{channel}}"),
        ("DELETE", f"{n}/channels/{{channel}}"), ("POST", f"{n}/channels/{{channel}}/test"),
        ("GET", f"{n}/rules"), ("POST", f"{n}/rules"), ("POST", f"{n}/rules/remove"),
        ("GET", f"{n}/deliveries"), ("POST", f"{n}/deliveries/{{delivery}}/retry"))} == {
        ("POST", "/api/v1/projects/{project}/triggers/{trigger}/backfill"): Level.OPERATE,
        ("GET", f"{n}/channels"): Level.READ, ("POST", f"{n}/channels"): Level.ADMIN,
        ("GET", f"{n}/channels/{{channel}}"): Level.READ,
        ("DELETE", f"{n}/channels/{{channel}}"): Level.ADMIN,
        ("POST", f"{n}/channels/{{channel}}/test"): Level.OPERATE,
        ("GET", f"{n}/rules"): Level.READ, ("POST", f"{n}/rules"): Level.ADMIN,
        ("POST", f"{n}/rules/remove"): Level.ADMIN, ("GET", f"{n}/deliveries"): Level.READ,
        ("POST", f"{n}/deliveries/{{delivery}}/retry"): Level.OPERATE}


def test_channel_and_backfill_bodies_are_strict_and_secrets_are_write_only() -> None:
    body = read_body(ChannelRequest, "application/json",
                     b'{"name": "ops", "kind": "webhook", "url": "https://h.example/x", '
                     b'"secret": "k", "from": "ql@example.com"}')
    assert isinstance(body, ChannelRequest) and body.from_ == "ql@example.com"
    for raw, field in ((b'{"name": "ops", "kind": "webhook", "password": "x"}', "password"),
                       (b'{"name": "ops", "kind": "webhook", "max_attempts": "3"}',
                        "max_attempts")):
        with pytest.raises(InvalidInput) as caught:
            read_body(ChannelRequest, "application/json", raw)
        assert caught.value.field == field
    with pytest.raises(InvalidInput) as caught:
        read_body(BackfillRequest, "application/json", b'{"to": 1}')
    assert caught.value.field == "from"
    document = build_openapi(api_endpoints())
    schemas = document["components"]["schemas"]  # type: ignore[index]
    for view in ("ChannelView", "RuleView", "DeliveryView", "NotifyTestView"):
        assert "secret" not in schemas[view]["properties"] or \
            schemas[view]["properties"]["secret"].get("enum") == ["set", "not set"], view
