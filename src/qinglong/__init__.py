"""qinglong: a cron scheduling platform that admits every occurrence exactly once."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
