"""Trigger revisions rebuilt from stored spec text (domain/stored_trigger.py): the same record,
the same digest and the same refusals as the general path, for every kind of spec."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qinglong.domain.canonical import canonical_json
from qinglong.domain.cron_dst import DstGap, DstOverlap, DstPolicy
from qinglong.domain.jitter import Jitter
from qinglong.domain.stored_trigger import content_text, stored_spec, trigger_revision_from_text
from qinglong.domain.trigger import (
    Overlap,
    OverlapPolicy,
    TriggerRevision,
    TriggerSpec,
    new_trigger_revision,
    trigger_revision_from_row,
)
from qinglong.errors import RecordCorrupt
from qinglong.storage import records

SPECS = [
    TriggerSpec.parse(expression="*/5 * * * *", timezone="UTC", misfire="fire_once"),
    TriggerSpec.parse(expression="0 3 * * *", timezone="Asia/Shanghai", misfire="skip",
                      overlap=Overlap(policy=OverlapPolicy.SKIP),
                      dst=DstPolicy(gap=DstGap.SKIP, overlap=DstOverlap.BOTH),
                      jitter=Jitter(30, 5)),
    TriggerSpec.parse(expression="every 90s from 2026-12-01T08:00:00+08:00",
                      timezone="US/Eastern", misfire="fire_once", jitter=Jitter(10)),
    TriggerSpec.parse(expression="at 2026-12-24T18:00:00+08:00", timezone="UTC", misfire="skip",
                      overlap=Overlap(policy=OverlapPolicy.SKIP)),
]

ids = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
revisions = st.integers(min_value=1, max_value=2**31 - 1)
# a task digest is any string to the canonical form: quotes, escapes and non-ASCII included
digests = st.text(max_size=70)


def _revision(project: str, trigger: str, revision: int, task: str, task_revision: int,
              digest: str, spec: TriggerSpec, enabled: bool) -> TriggerRevision:
    return new_trigger_revision(project=project, trigger=trigger, revision=revision, task=task,
                                task_revision=task_revision, task_content_digest=digest,
                                spec=spec, enabled=enabled, created_at_ms=1_700_000_000_000)


def _row(revision: TriggerRevision, spec_text: str | None = None) -> dict[str, object]:
    return {"project_id": revision.project_id, "trigger_id": revision.trigger_id,
            "revision": revision.revision, "task_id": revision.task_id,
            "task_revision": revision.task_revision,
            "task_content_digest": revision.task_content_digest,
            "spec_json": revision.spec.json_text() if spec_text is None else spec_text,
            "enabled": revision.enabled, "content_digest": revision.content_digest,
            "created_at_ms": revision.created_at_ms}


@settings(max_examples=300, deadline=None)
@given(ids, ids, revisions, ids, revisions, digests, st.sampled_from(SPECS), st.booleans())
def test_the_written_out_content_is_the_canonical_json(
        project: str, trigger: str, revision: int, task: str, task_revision: int, digest: str,
        spec: TriggerSpec, enabled: bool) -> None:
    record = _revision(project, trigger, revision, task, task_revision, digest, spec, enabled)
    assert content_text(record, canonical_json(spec.envelope())) == canonical_json(record.content())
    row = _row(record)
    rebuilt = trigger_revision_from_text(row, str(row["spec_json"]))
    assert rebuilt == record == trigger_revision_from_row(row, json.loads(str(row["spec_json"])))
    assert records.trigger_revision(row) == record  # the mapper takes this path for text


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.kind)
def test_a_spec_stored_with_other_spacing_rebuilds_the_same_record(spec: TriggerSpec) -> None:
    record = _revision("p", "t", 3, "task", 2, "d" * 64, spec, True)
    spaced = json.dumps(spec.envelope(), indent=2)
    assert trigger_revision_from_text(_row(record, spaced), spaced) == record


@pytest.mark.parametrize("change", [
    {"content_digest": "0" * 64}, {"enabled": False}, {"revision": 4}, {"task_revision": 3},
    {"task_content_digest": "e" * 64}, {"trigger_id": "u"}, {"project_id": "q"},
])
def test_any_changed_stored_value_fails_the_digest(change: dict[str, object]) -> None:
    record = _revision("p", "t", 3, "task", 2, "d" * 64, SPECS[1], True)
    row = {**_row(record), **change}
    with pytest.raises(RecordCorrupt, match="failed its content digest check"):
        trigger_revision_from_text(row, str(row["spec_json"]))


def test_a_changed_spec_text_fails_the_digest_though_it_parses() -> None:
    record = _revision("p", "t", 3, "task", 2, "d" * 64, SPECS[0], True)
    other = SPECS[0].json_text().replace("*/5", "*/6")
    with pytest.raises(RecordCorrupt, match="failed its content digest check"):
        trigger_revision_from_text(_row(record, other), other)


@pytest.mark.parametrize(("text", "problem"), [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"schema": "qinglong/cron@v1"}', "malformed"),
    (('{"schema": "qinglong/cron@v1", "config": {"expression": "99 * * * *", "timezone": "UTC",'
     ' "misfirePolicy": "skip"}}'), "malformed"),
])
def test_a_spec_that_does_not_parse_is_corrupt_every_time(text: str, problem: str) -> None:
    record = _revision("p", "t", 3, "task", 2, "d" * 64, SPECS[0], True)
    for _ in range(2):  # a failure is not kept: the same text is refused again
        with pytest.raises(RecordCorrupt, match=problem):
            trigger_revision_from_text(_row(record, text), text)
    assert stored_spec.cache_info().currsize <= stored_spec.cache_info().maxsize


def test_a_malformed_identifier_is_corrupt() -> None:
    record = _revision("p", "t", 3, "task", 2, "d" * 64, SPECS[0], True)
    row = {**_row(record), "trigger_id": "Not An Id"}
    with pytest.raises(RecordCorrupt, match="malformed"):
        trigger_revision_from_text(row, str(row["spec_json"]))
