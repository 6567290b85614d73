"""Storage: the kernel (``kernel.py``: Database, Tx, Driver, Capabilities) and every store,
written once over it; ``sqlite`` and ``postgres`` hold each dialect's driver, its queries and
what really differs. ``open.py::open_database`` is the one place that reads a URL's kind.
"""

from __future__ import annotations
