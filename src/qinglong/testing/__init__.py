"""Helpers for testing code built on qinglong (and for qinglong's own tests)."""

from __future__ import annotations

from qinglong.testing.clock import FakeClock

__all__ = ["FakeClock"]
