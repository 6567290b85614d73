"""HTTP surfaces (ASGI, Starlette)."""

from __future__ import annotations
