"""The boundary's pure parts (issue 18): the OpenAPI document states the patterns and bounds
the server checks with, strict JSON, the query readers' ranges, answers that render any stored
text, and the CLI's escaping of terminal controls."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qinglong.cli.output import json_text, shown
from qinglong.domain import identifiers as ids
from qinglong.domain import project_env, retry, task
from qinglong.domain.manual import REQUEST_ID, request_id
from qinglong.domain.notify import channels
from qinglong.domain.organise import check_filter_name
from qinglong.domain.task_env import ENV_NAME
from qinglong.domain.text import NotJson, check_json_value, strict_json
from qinglong.errors import InvalidInput
from qinglong.service.accounts import USERNAME, check_username
from qinglong.service.passwords import MAX_PASSWORD, MIN_PASSWORD
from qinglong.web.app import api_endpoints
from qinglong.web.field_rules import NO_CONTROLS
from qinglong.web.openapi import build_openapi
from qinglong.web.problems import json_bytes
from qinglong.web.requests import TriggerPublishRequest
from qinglong.web.routing import IDENTIFIERS, QUALIFIED, Query, read_body, read_path, read_query

DOCUMENT: dict[str, Any] = build_openapi(api_endpoints())
PATH_PARAM = re.compile(r"\{([a-z_]+)\}")


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, op) for path, ops in DOCUMENT["paths"].items()
            for method, op in ops.items()]


# --- the document states what the server checks ---------------------------------------------


def test_every_path_parameter_states_the_pattern_the_server_checks_it_with() -> None:
    seen = set()
    for method, path, op in _operations():
        stated = {p["name"]: p["schema"] for p in op.get("parameters", []) if p["in"] == "path"}
        assert set(stated) == set(PATH_PARAM.findall(path)), (method, path)
        for name, schema in stated.items():
            assert schema == {"type": "string", "pattern": IDENTIFIERS[name].pattern.pattern}, (
                method, path, name)
            seen.add(name)
    assert seen == {"project", "task", "trigger", "run", "token", "username", "channel",
                    "delivery", "flow", "flow_run", "variable", "repo", "filter"}


def test_query_parameters_named_like_identifiers_state_their_pattern_and_numbers_a_range() -> None:
    for method, path, op in _operations():
        for parameter in (p for p in op.get("parameters", []) if p["in"] == "query"):
            schema = parameter["schema"]
            if parameter["name"] in IDENTIFIERS and schema.get("type") == "string":
                # the Runs filters also take a task or trigger as PROJECT/ID
                rule = IDENTIFIERS[parameter["name"]]
                if (method, path) == ("get", "/api/v1/runs"):
                    rule = QUALIFIED.get(parameter["name"], rule)
                assert schema["pattern"] == rule.pattern.pattern
            if schema.get("type") == "integer":
                assert "minimum" in schema and "maximum" in schema, (method, path, parameter)


def _at_most(name: str, size: int) -> Any:
    def check(value: str) -> None:
        if len(value) > size:
            raise InvalidInput(name, f"longer than {size}")
    return check


def _run_ref(value: str) -> None:
    if not ids.UUID_REF.fullmatch(value.lower()):  # what the Run reader checks
        raise InvalidInput("run", ids.RUN_REF_RULE)
    if len(value) < 8:  # shorter than a prefix may be
        raise InvalidInput("run", "prefix too short")


# The checks the handlers (and the stores behind them) apply to a path parameter once the
# dispatcher has read it: each must accept whatever the document's pattern allows.
HANDLER_CHECKS: dict[str, Any] = {
    "project": ids.project_id,
    "task": lambda value: ids.entity_id(value, "task"),
    "trigger": lambda value: ids.entity_id(value, "trigger"),
    "run": _run_ref,
    "token": _at_most("token", 32),
    "username": check_username,
    "channel": channels.check_name,
    "delivery": _at_most("delivery", 36),
    "flow": lambda value: ids.entity_id(value, "flow"),
    "flow_run": _run_ref,  # (a prefix the flow store looks up, as a Run's)
    "variable": project_env.variable_name,  # (the store's check of an entry's name)
    "repo": lambda value: ids.entity_id(value, "repo"),
    "filter": check_filter_name,
}


def _stated(name: str) -> str:
    """The pattern the document states for path parameter ``name``."""
    for _, _, op in _operations():
        for parameter in op.get("parameters", []):
            if parameter["in"] == "path" and parameter["name"] == name:
                return str(parameter["schema"]["pattern"])
    raise KeyError(name)


@pytest.mark.parametrize("name", sorted(IDENTIFIERS))
@given(data=st.data())
def test_what_the_document_allows_the_server_accepts_and_nothing_else(name: str,
                                                                    data: st.DataObject) -> None:
    stated = _stated(name)
    allowed = data.draw(st.from_regex(stated, fullmatch=True).filter(lambda v: "\n" not in v))
    assert read_path({name: allowed}) == {name: allowed}
    HANDLER_CHECKS[name](allowed)
    other = data.draw(st.text(max_size=40))
    if re.fullmatch(stated, other) and "\n" not in other:
        assert read_path({name: other}) == {name: other}
    else:
        with pytest.raises(InvalidInput) as refused:
            read_path({name: other})
        assert refused.value.field == name


def _field(model: str, name: str) -> dict[str, Any]:
    schema = DOCUMENT["components"]["schemas"][model]["properties"][name]
    return next((part for part in schema.get("anyOf", []) if part.get("type") != "null"),
                schema)


@pytest.mark.parametrize(("model", "name", "keywords"), [
    ("ProjectCreateRequest", "id", {"pattern": ids.PROJECT_ID.pattern}),
    ("ProjectCreateRequest", "name", {"pattern": ids.DISPLAY_NAME.pattern}),
    ("TaskPublishRequest", "name", {"pattern": ids.DISPLAY_NAME.pattern}),
    ("TriggerPublishRequest", "task", {"pattern": ids.ENTITY_ID.pattern}),
    ("RuleRequest", "channel", {"pattern": channels.NAME.pattern}),
    ("RuleRequest", "project", {"pattern": ids.PROJECT_ID.pattern}),
    ("RuleRequest", "task", {"pattern": ids.ENTITY_ID.pattern}),
    ("RunNowRequest", "request_id", {"pattern": REQUEST_ID.pattern}),
    ("UserCreateRequest", "username", {"pattern": USERNAME.pattern}),
    ("TokenCreateRequest", "username", {"pattern": USERNAME.pattern}),
    ("ChannelRequest", "name", {"pattern": channels.NAME.pattern}),
    ("ChannelRequest", "timeout_ms", {"minimum": channels.MIN_TIMEOUT_MS,
                                      "maximum": channels.MAX_TIMEOUT_MS}),
    ("ChannelRequest", "max_attempts", {"minimum": channels.MIN_ATTEMPTS,
                                        "maximum": channels.MAX_ATTEMPTS}),
    ("ChannelRequest", "smtp_port", {"minimum": 1, "maximum": channels.MAX_PORT}),
    ("ChannelRequest", "headers", {"maxItems": channels.MAX_HEADERS}),
    ("ChannelRequest", "to", {"maxItems": channels.MAX_RECIPIENTS}),
    ("TaskPublishRequest", "timeout_ms", {"minimum": task.MIN_TIMEOUT_MS,
                                          "maximum": task.MAX_TIMEOUT_MS}),
    ("TaskPublishRequest", "concurrency", {"minimum": 1, "maximum": task.MAX_CONCURRENCY}),
    ("RetryRequest", "max_attempts", {"minimum": 1, "maximum": retry.MAX_ATTEMPTS}),
    # found by the fuzz run (tests/e2e/test_api_fuzz.py): rules the document did not state
    ("UserCreateRequest", "password", {"minLength": MIN_PASSWORD, "maxLength": MAX_PASSWORD}),
    ("UserUpdateRequest", "password", {"minLength": MIN_PASSWORD, "maxLength": MAX_PASSWORD}),
    ("TokenCreateRequest", "name", {"pattern": NO_CONTROLS}),
    ("RepoAddRequest", "name", {"pattern": ids.ENTITY_ID.pattern}),
    ("RepoAddRequest", "token_env", {"pattern": ENV_NAME.pattern}),
    ("RepoAddRequest", "ssh_key_env", {"pattern": ENV_NAME.pattern}),
    ("FlowPublishRequest", "nodes", {"propertyNames": {"pattern": ids.ENTITY_ID.pattern}}),
])
def test_body_fields_state_the_rule_their_check_uses(model: str, name: str,
                                                     keywords: dict[str, object]) -> None:
    field = _field(model, name)
    assert {key: field.get(key) for key in keywords} == keywords, field


def test_text_query_parameters_state_that_control_characters_are_refused() -> None:
    """Found by the fuzz run: ``?cursor=%1F`` was refused with 422 though the document allowed
    any string; and DELETE .../scripts/content refused a missing ``path`` that the document
    called optional."""
    for method, path, op in _operations():
        for parameter in (p for p in op.get("parameters", []) if p["in"] == "query"):
            schema = parameter["schema"]
            if schema.get("type") == "string" and "pattern" not in schema \
                    and "enum" not in schema and "format" not in schema:
                raise AssertionError((method, path, parameter))
    assert re.fullmatch(NO_CONTROLS, "a b\tc\u00e9") and not re.search(NO_CONTROLS, "a\x1fb")
    delete = DOCUMENT["paths"]["/api/v1/projects/{project}/scripts/content"]["delete"]
    assert [p["required"] for p in delete["parameters"] if p["name"] == "path"] == [True]
    with pytest.raises(InvalidInput) as refused:
        Query("cursor", "str", "").read("a\x1fb")
    assert refused.value.field == "cursor"
    # and a query parameter with no name (``?=x``) was refused naming the field ""
    runs = next(e for e in api_endpoints() if (e.method, e.path) == ("GET", "/api/v1/runs"))
    for name, field in (("", "query"), ("\x01", "query"), ("colour", "colour")):
        with pytest.raises(InvalidInput) as refused:
            read_query(runs, {name: "x"}, [name])
        assert refused.value.field == field, name


def test_a_body_number_with_no_fraction_is_the_integer_it_equals() -> None:
    """Found by the fuzz run: ``{"jitter_s": 262.0}`` was refused ("a valid integer") though
    the document's ``integer`` (JSON Schema's) admits it."""
    read = read_body(TriggerPublishRequest, "application/json",
                     b'{"jitter_s": 262.0, "overlap_queue_limit": 1e1, "parameters": {"n": 2.0}}')
    assert (read.jitter_s, read.overlap_queue_limit, read.parameters) == (262, 10, {"n": 2})
    assert type(read.jitter_s) is int and type(read.parameters["n"]) is int
    for raw in (b'{"jitter_s": 262.5}', b'{"jitter_s": 1e300}', b'{"jitter_s": 9.3e18}'):
        with pytest.raises(InvalidInput) as refused:
            read_body(TriggerPublishRequest, "application/json", raw)
        assert refused.value.field == "jitter_s", raw


def test_request_ids_the_document_allows_are_accepted() -> None:
    assert request_id("deploy-42:a.b_c") == "deploy-42:a.b_c"


def test_the_openapi_document_and_the_event_stream_are_described_as_what_they_are() -> None:
    document = DOCUMENT["paths"]["/api/v1/openapi.json"]["get"]["responses"]["200"]["content"]
    assert document["application/json"]["schema"]["type"] == "object"
    logs = DOCUMENT["paths"]["/api/v1/runs/{run}/logs"]["get"]["responses"]["200"]["content"]
    event = logs["text/event-stream"]["schema"]  # one event, as before OpenAPI 3.2
    assert event["type"] == "object" and event["required"] == ["event", "data"]
    assert [(kind["properties"]["event"]["const"], kind["properties"]["data"]["contentSchema"])
            for kind in event["oneOf"]] == [
        ("log", {"$ref": "#/components/schemas/LogEventData"}),
        ("end", {"$ref": "#/components/schemas/EndEventData"}),
        ("error", {"$ref": "#/components/schemas/Problem"})]
    validator = jsonschema.Draft202012Validator(event)
    validator.validate({"event": "end", "data": '{"status":"succeeded"}'})
    assert not validator.is_valid({"event": "tick", "data": "{}"})
    assert logs["text/plain"]["schema"] == {"type": "string"}
    assert set(DOCUMENT["components"]["schemas"]["LogEventData"]["required"]) == {"text"}


# --- strict JSON ------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "field", "rule"), [
    ('{"a": "\\ud800"}', "a", "surrogate"),
    ('{"a": ["x", "\\udfff"]}', "a[1]", "surrogate"),
    ('{"\\ud800": 1}', "body", "surrogate"),
    ('{"a": {"b": "\\ud83d"}}', "a.b", "surrogate"),
    ("[" * 1000 + "]" * 1000, "body", "nests deeper than 32 levels"),
    ("[" * 33 + "]" * 33, "body", "nests deeper than 32 levels"),
    ('{"n": ' + "9" * 30 + "}", "n", "out of range"),
    ('{"n": -9223372036854775809}', "n", "out of range"),
    ('{"n": 1e999}', "n", "out of range"),
])
def test_strict_json_refuses_what_nothing_could_store(text: str, field: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        strict_json(text)
    assert refused.value.field == field and rule in refused.value.rule


@pytest.mark.parametrize("text", ["NaN", '{"a": Infinity}', "[-Infinity]", "{", "9" * 5000,
                                  b"\xff"])
def test_strict_json_says_what_is_not_json(text: str | bytes) -> None:
    with pytest.raises(NotJson):
        strict_json(text)


def test_strict_json_takes_what_is_fine() -> None:
    value = "[" * 32 + "]" * 32
    assert strict_json(value) is not None
    assert strict_json('{"emoji": "\\ud83d\\ude00", "n": 9223372036854775807, "f": 1.5}') == {
        "emoji": "\U0001f600", "n": 2**63 - 1, "f": 1.5}
    check_json_value({"a": [{"b": [1]}]}, max_depth=4)
    with pytest.raises(InvalidInput):
        check_json_value({"a": [{"b": [1]}]}, max_depth=3)


# --- query readers --------------------------------------------------------------------------


@pytest.mark.parametrize(("query", "text", "rule"), [
    (Query("limit", "int", "x"), "9" * 400, "must be a whole number"),
    (Query("limit", "int", "x"), "9223372036854775808", "between"),
    (Query("limit", "int", "x"), "\u00b2", "must be a whole number"),
    (Query("limit", "int", "x"), "\u0661", "must be a whole number"),
    (Query("since", "instant", "x"), "\u00b2", "RFC 3339"),
    (Query("since", "instant", "x"), "9" * 400, "RFC 3339"),
    (Query("from", "date", "x"), "9999-12-31", "from 1970-01-01 to 9998-12-31"),
    (Query("from", "date", "x"), "1969-12-31", "from 1970-01-01 to 9998-12-31"),
    (Query("from", "date", "x"), "2026-02-30", "such as 2026-12-01"),
    (Query("from", "date", "x"), "\u0662\u0660\u0662\u0666-01-01", "such as 2026-12-01"),
    (Query("cron", "str", "x"), "* * *\x1b", "control characters"),
    (Query("cron", "str", "x"), "x" * 1025, "longer than 1024"),
    (Query("project", "str", "x"), "Demo", "lowercase"),
    (Query("channel", "str", "x"), "Bad Name", "1-64 lowercase"),
])
def test_query_values_out_of_range_are_refused(query: Query, text: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        query.read(text)
    assert refused.value.field == query.name and rule in refused.value.rule, refused.value.rule


def test_query_values_in_range_are_read() -> None:
    assert Query("limit", "int", "x").read("-9223372036854775808") == -(2**63)
    assert Query("from", "date", "x").read("9998-12-31") == "9998-12-31"
    assert Query("since", "instant", "x").read("253402300799999") == 253_402_300_799_999
    assert Query("project", "str", "x").read("demo-1") == "demo-1"
    assert Query("cron", "str", "x").read("0 0 1 1 *") == "0 0 1 1 *"


# --- answers render any stored text -----------------------------------------------------------


def test_answers_render_a_stored_surrogate_as_its_json_escape_and_nan_as_text() -> None:
    body = json_bytes({"url": "https://x/\ud800\x1b", "emoji": "\U0001f600",
                       "n": float("nan"), "deep": [{"inf": float("inf")}]})
    assert body == ('{"url":"https://x/\\ud800\\u001b","emoji":"\U0001f600","n":"nan",'
                    '"deep":[{"inf":"inf"}]}').encode()
    assert json.loads(body)["url"] == "https://x/\ud800\x1b"


# --- the CLI's escaping ----------------------------------------------------------------------


@pytest.mark.parametrize(("text", "printed"), [
    ("plain text", "plain text"),
    ("two\nlines\tand a tab", "two\nlines\tand a tab"),
    ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
    ("\x1b]0;title\x07", "\\x1b]0;title\\a"),
    ("over\rwrite", "over\\rwrite"),
    ("nul\x00 del\x7f", "nul\\x00 del\\x7f"),
    ("csi\x9b1m c1\x85", "csi\\x9b1m c1\\x85"),
    ("bad \udcff byte", "bad \\udcff byte"),
    ("\u00e9\u4e2d\U0001f600", "\u00e9\u4e2d\U0001f600"),
])
def test_shown_escapes_terminal_controls_visibly(text: str, printed: str) -> None:
    assert shown(text) == printed


def test_json_output_escapes_what_json_leaves_raw_and_reads_back_the_same() -> None:
    value = {"c": "\x1b[2J\x7f\x9b\udcff\u00e9"}
    text = json_text(value, sort_keys=True)
    assert text == '{"c": "\\u001b[2J\\u007f\\u009b\\udcff\u00e9"}'
    assert json.loads(text) == value


@pytest.mark.parametrize(("text", "rule"), [
    ('{"text": "{summary} \\ud800"}', "surrogate"),
    ('{"a": ' + "[" * 40 + "]" * 40 + "}", "nests deeper than 32 levels"),
    ('{"a": NaN}', "is not JSON (NaN is not a JSON value)"),
    ('{"a": 1e999}', "out of range"),
])
def test_a_body_template_given_on_the_command_line_is_read_as_strictly(text: str,
                                                                        rule: str) -> None:
    from qinglong.domain.notify.templates import parse_body_template

    with pytest.raises(InvalidInput) as refused:
        parse_body_template(text)
    assert refused.value.field.startswith("body-template") and rule in refused.value.rule
