"""The SQLite adapter (stdlib sqlite3, WAL): edge and standalone profiles."""

from __future__ import annotations
