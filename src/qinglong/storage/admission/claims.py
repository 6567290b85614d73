"""A claimed schedule row as read back from the claim: the claim (candidate plus fence) it
holds, the trigger revision it pins (verified once per stored content), and the two ways a
commit refuses it: a ``Raced`` value and a clock that ran backwards.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from qinglong.domain.schedule import ClaimFence, ScheduleCandidate, ScheduleClaim
from qinglong.domain.trigger import TriggerRevision
from qinglong.errors import RecordCorrupt, StorageError
from qinglong.storage import records
from qinglong.storage.admission.params import CorruptScheduleRow

VERIFIED_REVISIONS = 1024  # trigger revisions kept verified: more than the claims of one cycle


class Raced(Exception):
    """A claimed row changed before its commit (``reason``: what changed); the occurrence is
    reported raced and decided again, never an error."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ClockRegressed(StorageError):
    """The database clock at commit is earlier than at claim."""

    code = "QL_CLOCK_REGRESSED"


class VerifiedRevisions:
    """Trigger revisions rebuilt from their stored rows with their digests verified, keyed by
    the stored content: a row whose every stored value (spec included) equals one verified
    before is the same record, so it is not parsed and hashed again. Any difference -- a
    tampered spec, another digest -- misses and is verified afresh. Bounded (LRU)."""

    def __init__(self, size: int = VERIFIED_REVISIONS) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[Any, ...], tuple[object, TriggerRevision]] = OrderedDict()

    def get(self, row: Mapping[str, Any]) -> TriggerRevision:
        """The row's ``t_`` columns as a verified revision (RecordCorrupt if they fail)."""
        # every stored value but the spec (compared below), named one by one (a hot path)
        key = (row["project_id"], row["trigger_id"], row["t_revision"], row["t_task_id"],
               row["t_task_revision"], row["t_task_content_digest"], row["t_enabled"],
               row["t_content_digest"], row["t_created_at_ms"])
        spec = row["t_spec_json"]
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0] == spec:
                self._entries.move_to_end(key)
                return hit[1]
        revision = records.candidate_trigger_revision(row)
        with self._lock:
            self._entries[key] = (spec, revision)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return revision


REVISIONS = VerifiedRevisions()


def candidate_from_row(row: Mapping[str, Any]) -> ScheduleCandidate:
    """``records.candidate_from_row`` with the trigger revision from REVISIONS."""
    return records.candidate_with_revision(row, REVISIONS.get(row))


def claim_from_row(row: Mapping[str, Any]) -> ScheduleClaim | CorruptScheduleRow:
    try:
        candidate = candidate_from_row(row)
    except RecordCorrupt as exc:
        return CorruptScheduleRow(project_id=row["project_id"], trigger_id=row["trigger_id"],
                                  problem=exc.message)
    return ScheduleClaim(
        candidate=candidate,
        fence=ClaimFence(
            owner=row["claim_owner"],
            token=row["claim_token"],
            version=int(row["claim_version"]),
            acquired_at_ms=int(row["claim_acquired_at_ms"]),
            expires_at_ms=int(row["claim_expires_at_ms"]),
        ),
        row_locator=row["row_locator"],
    )
