"""Translate sqlite3 exceptions into the qinglong error hierarchy (one place)."""

from __future__ import annotations

import sqlite3

from qinglong.errors import Conflict, StorageError, TransientStorageError

_BUSY_WORDS = ("database is locked", "database table is locked", "busy")


def translate(exc: sqlite3.Error, action: str) -> StorageError | Conflict:
    if isinstance(exc, sqlite3.IntegrityError):
        return Conflict(f"{action}: the database refused a duplicate or inconsistent row")
    if isinstance(exc, sqlite3.OperationalError) and any(w in str(exc) for w in _BUSY_WORDS):
        return TransientStorageError(f"{action}: the database is busy")
    return StorageError(f"{action}: SQLite error ({type(exc).__name__})")
