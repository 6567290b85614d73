"""The queue as /metrics and `GET /api/v1/queue` show it, read by `ql control` replicas,
`ql serve` and `ql web` alike: its depth and oldest age, and the queued Runs that require
worker labels by requirement set, each marked when no live executor offers them all
(docs/controls/placement.md)."""

from __future__ import annotations

from pydantic import Field

from qinglong.domain.placement import unplaceable
from qinglong.metrics import (
    PLACEMENT_GROUPS,
    QUEUE_COUNT_CAP,
    QueueSample,
    RequirementSample,
    queue_sample,
)
from qinglong.service.views.base import ViewModel
from qinglong.storage.instances import INSTANCE_STALE_MS
from qinglong.storage.runs import RunStore


def read_queue(runs: RunStore, cap: int = QUEUE_COUNT_CAP) -> QueueSample:
    """Two reads by the store's clock: the depth (along runs_queued_idx, at most ``cap``
    Runs counted) and, when any Run is queued, the placement (an empty queue has no
    requirement sets: an idle replica sends one statement every sample, not four)."""
    sample = queue_sample(*runs.queue_depth(cap))
    if sample.depth == 0:
        return QueueSample(0, sample.oldest_age_ms, ())
    placed = runs.queue_placement(cap, PLACEMENT_GROUPS, INSTANCE_STALE_MS)
    groups = tuple(
        RequirementSample(requires=",".join(requires), depth=depth,
                          oldest_age_ms=placed.now_ms - oldest_ms,
                          unplaceable=unplaceable(requires, placed.offers) is not None)
        for requires, depth, oldest_ms in placed.groups)
    return QueueSample(sample.depth, sample.oldest_age_ms, groups)


API_COUNT_CAP = 100_000  # queued Runs the API counts at most (a page asks every few seconds)


class RequirementView(ViewModel):
    requires: list[str] = Field(description="The worker labels these Runs need")
    queued: int
    oldest_age_ms: int
    unplaceable: bool = Field(description="No live worker (or ql serve) offers them all")


class QueueView(ViewModel):
    queued: int = Field(description=f"Queued Runs (counted up to {API_COUNT_CAP:,})")
    oldest_age_ms: int | None = Field(description="How long the oldest has waited (null: none)")
    requirements: list[RequirementView] = Field(
        description=f"Queued Runs that require worker labels, by set (the {PLACEMENT_GROUPS} "
                    "largest sets)")
    unplaceable: int = Field(description="Queued Runs no live worker can take")


def queue_view(runs: RunStore) -> QueueView:
    sample = read_queue(runs, API_COUNT_CAP)
    groups = [RequirementView(requires=g.requires.split(","), queued=g.depth,
                              oldest_age_ms=max(0, g.oldest_age_ms), unplaceable=g.unplaceable)
              for g in sample.requirements]
    return QueueView(queued=sample.depth, oldest_age_ms=sample.oldest_age_ms,
                     requirements=groups,
                     unplaceable=sum(g.queued for g in groups if g.unplaceable))
