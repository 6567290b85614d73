"""Fresh identifiers (qinglong/ids.py): version 4 UUIDs drawn from a pool of random bytes."""

from __future__ import annotations

import os
import uuid

from qinglong.ids import new_uuid, new_uuids


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
