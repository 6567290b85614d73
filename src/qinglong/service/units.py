"""A use case that writes several stores as one unit of work, whoever calls it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from qinglong.storage.kernel import Database

T = TypeVar("T")


def as_one_unit(db: Database, action: str, work: Callable[[], T]) -> T:
    """``work`` as one unit of work (retried after a conflict), or inside the caller's when
    there is one already (an API request runs its handler in one)."""
    return work() if db.in_unit else db.unit(action, work)
