"""What commands share: the clock and opening the database named on the command line."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from qinglong.clock import SystemClock
from qinglong.profiles.backends import Backend, open_backend
from qinglong.service.catalog import Catalog
from qinglong.service.runs import RunViews

CLOCK = SystemClock()


@contextmanager
def backend(database_url: str) -> Iterator[Backend]:
    opened = open_backend(database_url, CLOCK)
    try:
        yield opened
    finally:
        opened.close()


@contextmanager
def catalog(database_url: str) -> Iterator[Catalog]:
    with backend(database_url) as opened:
        yield Catalog(opened.definitions, CLOCK)


@contextmanager
def run_views(database_url: str) -> Iterator[RunViews]:
    with backend(database_url) as opened:
        yield RunViews(opened.runs, lifecycle=opened.lifecycle, logs=opened.logs)
