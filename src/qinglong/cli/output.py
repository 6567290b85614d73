"""Rendering for the CLI: RFC 3339 times, plain tables and JSON.

Everything printed goes through ``shown`` (plain text) or ``emit_json``: text that came from
a database or a server -- a command set over the API, a channel's URL, an error summary -- can
hold terminal control characters, and a terminal would obey them (move the cursor, rewrite a
line, change its title). They are printed as visible escapes instead (``\\x1b``, ``\\r``,
``\\x9b``; a lone surrogate as ``\\udc80``), newlines and tabs as they are. JSON output escapes
them as JSON does (``\\u001b``), so it still reads back as the same value.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

import click

from qinglong.service.times import local_and_utc, rfc3339, viewer_zone
from qinglong.service.views.base import ViewModel

__all__ = ["emit_json", "emit_table", "rfc3339", "say", "shown", "warn", "when"]

# C0 controls but newline and tab, DEL, C1 controls, lone surrogates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# What JSON (ensure_ascii=False) leaves raw of those: DEL, C1, lone surrogates.
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\ud800-\udfff]")
_NAMED = {"\r": "\\r", "\x0b": "\\v", "\x0c": "\\f", "\x08": "\\b", "\x07": "\\a"}


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: str) -> str:
    """``text`` safe for a terminal: control characters (but newline and tab) and lone
    surrogates as visible escapes."""
    return _UNSAFE.sub(_visible, text)


def when(ms: int | None) -> str:
    """An instant for people: local wall time next to UTC (see service.times)."""
    return local_and_utc(ms, viewer_zone())


def _plain(value: Any) -> Any:
    if isinstance(value, ViewModel):  # a view: its JSON form, as the HTTP API serves it
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def json_text(value: Any, **options: Any) -> str:
    """``value`` as JSON that is safe to print (see the module's text)."""
    text = json.dumps(value, ensure_ascii=False, **options)
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def emit_json(value: Any) -> None:
    click.echo(json_text(_plain(value), indent=2, sort_keys=True))


def emit_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> None:
    text_rows = [[shown("" if cell is None else str(cell)) for cell in row] for row in rows]
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
    click.echo(shown(message))


def warn(message: str) -> None:
    click.echo(shown(message), err=True)


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()
