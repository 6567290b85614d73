"""Load named SQL blocks (``-- name: block_name``) from the ``.sql`` files beside an adapter."""

from __future__ import annotations

import re
from importlib import resources
from typing import LiteralString

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$")


def parse_blocks(text: str, source: str) -> dict[str, LiteralString]:
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = _NAME.match(line.strip())
        if match:
            name = match.group(1)
            if name in blocks:
                raise ValueError(f"{source}: duplicate SQL block {name!r}")
            current = blocks[name] = []
        elif current is not None:
            current.append(line)
    result: dict[str, LiteralString] = {}
    for name, lines in blocks.items():
        body = "\n".join(line for line in lines if not line.strip().startswith("--")).strip()
        if not body:
            raise ValueError(f"{source}: SQL block {name!r} is empty")
        result[name] = body.rstrip(";")  # built from .sql files only
    return result


def load_queries(package: str) -> dict[str, LiteralString]:
    """All named blocks of every ``queries/*.sql`` file in ``package``."""
    folder = resources.files(package).joinpath("queries")
    queries: dict[str, LiteralString] = {}
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if not entry.name.endswith(".sql"):
            continue
        for name, body in parse_blocks(entry.read_text(encoding="utf-8"), entry.name).items():
            if name in queries:
                raise ValueError(f"{entry.name}: SQL block {name!r} is defined twice")
            queries[name] = body
    return queries
