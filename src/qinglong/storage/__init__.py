"""Storage: ports (Protocols the core needs) and the SQLite and PostgreSQL adapters.

Adapters never import each other; only ``qinglong.profiles`` picks one.
"""

from __future__ import annotations
