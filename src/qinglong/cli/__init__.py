"""The `ql` command line."""

from __future__ import annotations
