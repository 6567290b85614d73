"""AdmissionIds.new with the default id source: four distinct RFC 4122 version-4 UUIDs per
admission, drawn at once from the pool of random bytes (qinglong/ids.py; the hot path of the
batched admission)."""

from __future__ import annotations

import uuid

from qinglong.domain.admission import AdmissionIds
from qinglong.ids import new_uuid


def test_four_distinct_version_4_uuids_per_admission() -> None:
    seen: set[str] = set()
    for _ in range(2_000):
        ids = AdmissionIds.new(new_uuid)
        four = [ids.run_id, ids.attempt_id, ids.created_event_id, ids.queued_event_id]
        for text in four:
            parsed = uuid.UUID(text)
            assert str(parsed) == text  # canonical lower-case 8-4-4-4-12
            assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        seen.update(four)
    assert len(seen) == 8_000


def test_another_id_source_is_used_as_given() -> None:
    counter = iter(range(100))
    ids = AdmissionIds.new(lambda: f"id-{next(counter)}")
    assert (ids.run_id, ids.attempt_id, ids.created_event_id, ids.queued_event_id) == (
        "id-0", "id-1", "id-2", "id-3")
