"""What commands share: the clock and opening the database named on the command line."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from qinglong.clock import SystemClock
from qinglong.profiles.open import open_services
from qinglong.service.catalog import Catalog
from qinglong.service.container import Services
from qinglong.service.runs import RunViews

CLOCK = SystemClock()


@contextmanager
def services(database_url: str) -> Iterator[Services]:
    opened = open_services(database_url, CLOCK)
    try:
        yield opened
    finally:
        opened.close()


@contextmanager
def catalog(database_url: str) -> Iterator[Catalog]:
    with services(database_url) as opened:
        yield opened.catalog


@contextmanager
def run_views(database_url: str) -> Iterator[RunViews]:
    with services(database_url) as opened:
        yield opened.runs
