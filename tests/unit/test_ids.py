"""Fresh identifiers (qinglong/ids.py): version 4 UUIDs drawn from a pool of random bytes, and
the time-ordered version 7 UUIDs of admitted Runs and Attempts."""

from __future__ import annotations

import os
import uuid

import pytest

from qinglong.domain.admission import AdmissionIds
from qinglong.ids import MAX_INSTANT_MS, new_uuid, new_uuids, time_ordered_uuids


def test_every_id_is_a_version_4_uuid_in_its_canonical_text() -> None:
    drawn = [new_uuid() for _ in range(600)] + new_uuids(600)  # past one pool of 4 KiB
    for text in drawn:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == text
    assert len(set(drawn)) == len(drawn)


def test_a_forked_child_never_draws_the_bytes_its_parent_draws_next() -> None:
    new_uuid()  # the pool holds bytes the child would inherit
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.write(write_end, new_uuid().encode())
        os._exit(0)
    os.close(write_end)
    ours = new_uuid()
    theirs = os.read(read_end, 64).decode()
    os.close(read_end)
    os.waitpid(child, 0)
    assert uuid.UUID(theirs).version == 4
    assert theirs != ours


def test_time_ordered_ids_are_version_7_uuids_of_their_instant() -> None:
    at_ms = 1_796_629_801_123
    drawn = time_ordered_uuids(300, at_ms) + time_ordered_uuids(1, 0)
    for text in drawn[:-1]:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
        assert str(parsed) == text
        assert parsed.int >> 80 == at_ms  # the first 48 bits: the instant
    assert uuid.UUID(drawn[-1]).int >> 80 == 0
    assert len(set(drawn)) == len(drawn)  # 74 random bits apart within one millisecond


def test_a_later_instant_sorts_after_every_id_of_an_earlier_one_as_text() -> None:
    earlier = time_ordered_uuids(200, 1_796_629_801_000)
    later = time_ordered_uuids(200, 1_796_629_801_001)
    assert max(earlier) < min(later)


def test_an_instant_a_version_7_uuid_cannot_hold_is_refused() -> None:
    assert uuid.UUID(time_ordered_uuids(1, MAX_INSTANT_MS)[0]).int >> 80 == MAX_INSTANT_MS
    for at_ms in (-1, MAX_INSTANT_MS + 1):
        with pytest.raises(ValueError, match="cannot hold the instant"):
            time_ordered_uuids(1, at_ms)


def test_admission_ids_are_time_ordered_for_an_instant_and_random_without_one() -> None:
    def versions(ids: AdmissionIds) -> tuple[int, ...]:
        return tuple(uuid.UUID(i).version for i in (ids.run_id, ids.attempt_id,
                                                    ids.created_event_id, ids.queued_event_id))

    assert versions(AdmissionIds.new(new_uuid, at_ms=1_796_629_801_000)) == (7, 7, 4, 4)
    for at_ms in (None, -1, MAX_INSTANT_MS + 1):  # no instant, or one a v7 id cannot hold
        assert versions(AdmissionIds.new(new_uuid, at_ms=at_ms)) == (4, 4, 4, 4)
    counter = iter(range(1, 100))  # an injected id source is used as it is
    made = AdmissionIds.new(lambda: str(uuid.UUID(int=next(counter))), at_ms=1_796_629_801_000)
    assert made.run_id == str(uuid.UUID(int=1))
