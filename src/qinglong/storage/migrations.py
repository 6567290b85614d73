"""Ordered, checksummed migration streams and the history audit both dialects share.

A migration is one ``NNNN_slug.sql`` file; its checksum is the SHA-256 of the file's
bytes. History must be an exact, contiguous prefix of the code's list: a gap, an
unknown id or a changed checksum is drift, which is refused and never repaired.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    id: str
    sql: str
    checksum: str


@dataclass(frozen=True, slots=True)
class AppliedMigration:
    id: str
    checksum: str


def load_migrations(package: str) -> tuple[Migration, ...]:
    folder = resources.files(package).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        match = _FILE.fullmatch(entry.name)
        if match:
            data = entry.read_bytes()
            found.append(
                Migration(
                    id=entry.name.removesuffix(".sql"),
                    sql=data.decode("utf-8"),
                    checksum=hashlib.sha256(data).hexdigest(),
                )
            )
    found.sort(key=lambda m: m.id)
    for index, migration in enumerate(found, start=1):
        if int(migration.id[:4]) != index:
            raise RuntimeError(f"migration stream of {package} is not contiguous at {migration.id}")
    return tuple(found)


def audit_history(
    applied: list[AppliedMigration] | tuple[AppliedMigration, ...],
    code: tuple[Migration, ...],
) -> list[str]:
    """Findings for history drift; an empty list means history is a clean prefix of code."""
    findings: list[str] = []
    known = {m.id: m for m in code}
    for position, row in enumerate(applied):
        if row.id not in known:
            findings.append(f"unknown-migration:{row.id}")
            continue
        if position >= len(code) or code[position].id != row.id:
            findings.append(f"migration-out-of-order:{row.id}")
            continue
        if known[row.id].checksum != row.checksum:
            findings.append(f"checksum-mismatch:{row.id}")
    return findings


def pending(
    applied: list[AppliedMigration] | tuple[AppliedMigration, ...], code: tuple[Migration, ...]
) -> tuple[Migration, ...]:
    done = {row.id for row in applied}
    return tuple(m for m in code if m.id not in done)
