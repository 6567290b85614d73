"""The collector settings of a long-running process (qinglong/heap.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from qinglong import heap


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_settle_freezes_what_start_up_left_and_collects_the_young_less_often(
        restored_gc: None) -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    heap.settle()
    assert gc.get_freeze_count() > 1000  # the imported modules' objects, at least
    assert gc.get_threshold() == (heap.YOUNG_THRESHOLD, *heap.OLDER_THRESHOLDS)
    assert gc.isenabled()


def test_cycles_made_after_settling_are_still_collected(restored_gc: None) -> None:
    heap.settle()

    class Node:
        other: object = None

    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    assert gone() is not None  # a cycle: reference counts alone never free it
    gc.collect()
    assert gone() is None
