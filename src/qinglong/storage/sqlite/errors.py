"""Translate sqlite3 exceptions into the qinglong error hierarchy (one place).

Messages keep SQLite's own reason ("database disk image is malformed"), which is
low-sensitivity and is what an operator needs to act.
"""

from __future__ import annotations

import sqlite3

from qinglong.errors import Conflict, DatabaseCorrupt, StorageError, TransientStorageError

_BUSY_WORDS = ("database is locked", "database table is locked", "busy")
_CORRUPT = frozenset({"SQLITE_CORRUPT", "SQLITE_NOTADB"})


def is_corrupt(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", None) or ""
    if any(name == code or name.startswith(code + "_") for code in _CORRUPT):
        return True
    text = str(exc)
    return "malformed" in text or "file is not a database" in text


def translate(exc: sqlite3.Error, action: str) -> StorageError | Conflict:
    reason = str(exc) or type(exc).__name__
    if isinstance(exc, sqlite3.IntegrityError):
        return Conflict(f"{action}: the database refused a duplicate or inconsistent row")
    if is_corrupt(exc):
        return DatabaseCorrupt(f"{action}: the database file is damaged ({reason}); restore it "
                               "from a backup")
    if isinstance(exc, sqlite3.OperationalError) and any(w in reason for w in _BUSY_WORDS):
        return TransientStorageError(f"{action}: the database is busy")
    return StorageError(f"{action}: SQLite error ({reason})")
