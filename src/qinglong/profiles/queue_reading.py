"""The queue as /metrics shows it, read by `ql control` replicas and `ql serve` alike: its
depth and oldest age, and the queued Runs that require worker labels by requirement set,
each marked when no live executor offers them all (docs/controls/placement.md)."""

from __future__ import annotations

from qinglong.domain.placement import unplaceable
from qinglong.metrics import (
    PLACEMENT_GROUPS,
    QUEUE_COUNT_CAP,
    QueueSample,
    RequirementSample,
    queue_sample,
)
from qinglong.storage.instances import INSTANCE_STALE_MS
from qinglong.storage.runs import RunStore


def read_queue(runs: RunStore) -> QueueSample:
    """Two reads by the store's clock: the depth (along runs_queued_idx) and the placement."""
    sample = queue_sample(*runs.queue_depth(QUEUE_COUNT_CAP))
    placed = runs.queue_placement(QUEUE_COUNT_CAP, PLACEMENT_GROUPS, INSTANCE_STALE_MS)
    groups = tuple(
        RequirementSample(requires=",".join(requires), depth=depth,
                          oldest_age_ms=placed.now_ms - oldest_ms,
                          unplaceable=unplaceable(requires, placed.offers) is not None)
        for requires, depth, oldest_ms in placed.groups)
    return QueueSample(sample.depth, sample.oldest_age_ms, groups)
