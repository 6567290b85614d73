"""Rendering for the CLI: RFC 3339 times, plain tables and JSON."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

import click

from qinglong.service.times import local_and_utc, rfc3339, viewer_zone

__all__ = ["emit_json", "emit_table", "rfc3339", "say", "warn", "when"]


def when(ms: int | None) -> str:
    """An instant for people: local wall time next to UTC (see service.times)."""
    return local_and_utc(ms, viewer_zone())


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def emit_json(value: Any) -> None:
    click.echo(json.dumps(_plain(value), indent=2, sort_keys=True, ensure_ascii=False))


def emit_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> None:
    text_rows = [["" if cell is None else str(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in text_rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))
    line = "  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()
    click.echo(line)
    for row in text_rows:
        click.echo("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    if not rows:
        click.echo("(none)")


def say(message: str) -> None:
    click.echo(message)


def warn(message: str) -> None:
    click.echo(message, err=True)


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()
