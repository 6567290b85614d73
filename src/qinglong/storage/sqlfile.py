"""Load named SQL blocks (``-- name: block_name``) from the ``.sql`` files beside an adapter.

A file may also hold fragments (``-- fragment: fragment_name``): lines that are no query of
their own, written once and spliced into any block of the same file by a line
``-- include: fragment_name``. The fragments in ``storage/common/queries`` are seen by the
blocks of both dialects: text the two write the same way (column lists under the aliases
``storage/records.py`` reads), so it holds no statement argument (whose syntax differs) and
no table name (PostgreSQL's are schema-qualified).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from typing import LiteralString

_BLOCK = re.compile(r"^--\s*(name|fragment):\s*([a-z_][a-z0-9_]*)\s*$")
_INCLUDE = re.compile(r"^--\s*include:\s*([a-z_][a-z0-9_]*)\s*$")
COMMON = "qinglong.storage.common"


def _split(text: str, source: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The named blocks and the fragments of one file, as their raw lines."""
    blocks: dict[str, list[str]] = {}
    fragments: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = _BLOCK.match(line.strip())
        if match:
            kind, name = match.groups()
            found = blocks if kind == "name" else fragments
            if name in blocks or name in fragments:
                raise ValueError(f"{source}: duplicate SQL block {name!r}")
            current = found[name] = []
        elif current is not None:
            current.append(line)
    return blocks, fragments


def _sql(lines: list[str], strip: str | None = None) -> str:
    """The lines but comments, without the blank lines (``strip``: the characters) around."""
    return "\n".join(line for line in lines if not line.strip().startswith("--")).strip(strip)


def _expand(lines: list[str], fragments: Mapping[str, str], source: str) -> list[str]:
    out: list[str] = []
    for line in lines:
        match = _INCLUDE.match(line.strip())
        if match is None:
            out.append(line)
        elif match.group(1) in fragments:
            out.append(fragments[match.group(1)])
        else:
            raise ValueError(f"{source}: no SQL fragment {match.group(1)!r} to include")
    return out


def _fragments(lines: Mapping[str, list[str]], source: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, body in lines.items():
        if any(_INCLUDE.match(line.strip()) for line in body):
            raise ValueError(f"{source}: SQL fragment {name!r} includes another")
        found[name] = _sql(body, "\n")  # its indentation kept, to read well where spliced
        if not found[name].strip():
            raise ValueError(f"{source}: SQL fragment {name!r} is empty")
    return found


@functools.cache
def common_fragments() -> dict[str, str]:
    """The fragments both dialects see (``storage/common/queries/*.sql``)."""
    found: dict[str, str] = {}
    for entry in _sql_files(COMMON):
        blocks, lines = _split(entry.read_text(encoding="utf-8"), entry.name)
        if blocks:
            raise ValueError(f"{entry.name}: a common file holds fragments only, not "
                             f"{sorted(blocks)}")
        for name, body in _fragments(lines, entry.name).items():
            if name in found:
                raise ValueError(f"{entry.name}: SQL fragment {name!r} is defined twice")
            found[name] = body
    return found


def parse_blocks(text: str, source: str,
                 common: Mapping[str, str] | None = None) -> dict[str, LiteralString]:
    """The named blocks of one file, their includes spliced in (from the file's own
    fragments and ``common``, by default the common fragments)."""
    blocks, lines = _split(text, source)
    fragments = dict(common_fragments() if common is None else common)
    for name, body in _fragments(lines, source).items():
        if name in fragments:
            raise ValueError(f"{source}: SQL fragment {name!r} is also a common one")
        fragments[name] = body
    result: dict[str, LiteralString] = {}
    for name, block in blocks.items():
        body = _sql(_expand(block, fragments, source))
        if not body:
            raise ValueError(f"{source}: SQL block {name!r} is empty")
        result[name] = body.rstrip(";")  # built from .sql files only
    return result


def _sql_files(package: str) -> list[Traversable]:
    folder = resources.files(package).joinpath("queries")
    return sorted((entry for entry in folder.iterdir() if entry.name.endswith(".sql")),
                  key=lambda item: item.name)


def load_queries(package: str) -> dict[str, LiteralString]:
    """All named blocks of every ``queries/*.sql`` file in ``package``."""
    queries: dict[str, LiteralString] = {}
    for entry in _sql_files(package):
        for name, body in parse_blocks(entry.read_text(encoding="utf-8"), entry.name).items():
            if name in queries:
                raise ValueError(f"{entry.name}: SQL block {name!r} is defined twice")
            queries[name] = body
    return queries
