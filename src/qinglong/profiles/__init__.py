"""Composition roots: the only code that knows which storage adapter is in use."""

from __future__ import annotations
