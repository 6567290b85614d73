"""A task's environment entries: plain values and secrets, their canonical JSON, and the
command line's ``NAME=value`` form (``domain/command_spec.py`` holds the spec they belong to)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from qinglong.errors import InvalidInput

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
RESERVED_ENV_PREFIX = "QL_"


def plain_text(value: object, field: str, *, allow_empty: bool = True) -> str:
    """A string without NUL bytes (the rule of every text of a task spec)."""
    if not isinstance(value, str):
        raise InvalidInput(field, "must be a string")
    if "\x00" in value:
        raise InvalidInput(field, "must not contain NUL bytes")
    if not allow_empty and value == "":
        raise InvalidInput(field, "must not be empty")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvEntry:
    """One environment entry of a task. Every value is write-only in every view; ``plain``
    says whether it is a setting ``ql export`` writes out (``--env``, a literal in a
    definitions file) or a secret nothing ever reads back (``{from_env: ...}``, the API, and
    every entry stored before entries had a kind). A plain entry carries ``"plain": true`` in
    the canonical JSON, so a secret's JSON (and digest) is what it always was."""

    name: str
    value: str
    plain: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.plain, bool):
            raise InvalidInput("environment", "an entry's plain mark must be true or false")
        if not isinstance(self.name, str) or not ENV_NAME.fullmatch(self.name):
            raise InvalidInput(
                "environment", f"name {self.name!r} must match [A-Za-z_][A-Za-z0-9_]* (<=128)"
            )
        if self.name.upper().startswith(RESERVED_ENV_PREFIX):
            raise InvalidInput("environment", f"name {self.name!r} uses the reserved prefix QL_")
        plain_text(self.value, f"environment.{self.name}")


def env_json(entry: EnvEntry, kinds: bool) -> dict[str, object]:
    item: dict[str, object] = {"name": entry.name, "value": entry.value}
    if kinds and entry.plain:
        item["plain"] = True
    return item


def parse_env_entry(item: Mapping[str, object]) -> EnvEntry:
    """An entry from its canonical JSON (its keys already checked): ``plain`` only as true."""
    if "plain" in item and item["plain"] is not True:
        raise InvalidInput("environment", "an entry's plain mark is written only as true")
    return EnvEntry(name=item["name"], value=item["value"],  # type: ignore[arg-type]
                    plain="plain" in item)


def environment_from_pairs(pairs: Sequence[str]) -> tuple[EnvEntry, ...]:
    """Parse ``NAME=value`` strings (CLI form) into plain environment entries (the value
    is on a command line: ``ql export`` writes it out)."""
    entries = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise InvalidInput("env", f"{pair!r} must have the form NAME=value")
        entries.append(EnvEntry(name=name, value=value, plain=True))
    return tuple(entries)
