"""The garbage collector of a long-running process (`ql control`, `ql worker`, `ql serve`).

Python's cyclic collector is triggered by allocation counts: every 700 container objects
allocated and not yet freed start a young collection, and every hundredth one a full
collection that walks every tracked object in the process. A process that has imported
the web framework, pydantic, the database driver and the product holds a few hundred
thousand such objects, all of them alive until exit, and a busy scheduler or worker
allocates thousands of short-lived dicts and lists per batch. Measured on a burst of
admissions, the collector took about a seventh of a replica's CPU (docs/performance.md,
run AC), walking the same start-up objects again and again.

``settle`` is called once a process has started: one full collection, then everything
still alive moves to the permanent generation (``gc.freeze``), which no later collection
walks. It also raises the young generation's threshold, so a batch's objects are mostly
freed by their reference counts before a collection looks at them. Cycles are still
collected: only the start-up objects are exempt, and they live as long as the process.
"""

from __future__ import annotations

import gc

# Young collections after this many container allocations not yet freed (Python's default
# is 700); the older generations' thresholds are Python's defaults.
YOUNG_THRESHOLD = 20_000
OLDER_THRESHOLDS = (10, 10)


def settle() -> None:
    """Collect once, exempt what survives start-up from later collections, and collect the
    young generation less often. Idempotent: a second call freezes what the first left."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
