"""What commands share: the clock, opening the database named on the command line, and
printing a command's result as JSON or as text."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, TypeVar

from qinglong.cli.output import emit_json
from qinglong.clock import SystemClock

if TYPE_CHECKING:  # the services load when a command opens them, not with every command
    from qinglong.service.catalog import Catalog
    from qinglong.service.container import Services
    from qinglong.service.runs import RunViews

CLOCK = SystemClock()

S = TypeVar("S")
V = TypeVar("V")


@contextmanager
def services(database_url: str) -> Iterator[Services]:
    from qinglong.profiles.open import open_services

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


def respond(source: AbstractContextManager[S], call: Callable[[S], V], as_json: bool,
            text: Callable[[V], None]) -> None:
    """The skeleton of most commands: open ``source`` (``catalog(url)``, ``run_views(url)``
    ...), ``call`` it, close it, then print the result: as JSON with --json, else as ``text``
    writes it for people."""
    with source as opened:
        result = call(opened)
    if as_json:
        emit_json(result)
    else:
        text(result)
