"""Fresh identifiers: Run, Attempt and event ids and lease tokens are random UUIDs."""

from __future__ import annotations

import uuid


def new_uuid() -> str:
    """A random (version 4) UUID in its lowercase text form."""
    return str(uuid.uuid4())
