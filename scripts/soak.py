"""`make soak`: the long chaos soak (defaults: 4 replicas, 2 workers, 50 triggers, 10 minutes).

Set QL_SOAK_REPLICAS, QL_SOAK_WORKERS, QL_SOAK_TRIGGERS, QL_SOAK_MINUTES, or pass --seed to repeat a run.
"""

from __future__ import annotations

from testkit.soak import main

if __name__ == "__main__":
    raise SystemExit(main())
