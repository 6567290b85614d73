"""The pure core: specs, digests, revisions, cron occurrences and the decision.

Nothing in this package does I/O or reads a clock.
"""

from __future__ import annotations
