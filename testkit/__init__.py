"""The test harness: embedded PostgreSQL servers, replication, a fault-injecting wire proxy,
network namespaces, replica processes and the chaos soak.

It lives beside the product, not in it: `pip install qinglong` ships none of this. The test
suite imports it (pytest puts the repository root on ``sys.path``), and so do the demo and
soak scripts in ``scripts/``.
"""

from __future__ import annotations
