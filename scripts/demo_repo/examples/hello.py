# The demo's subscribed repository (scripts/demo_repo): `make demo` commits this folder to a
# local Git repository, subscribes the project to it with --auto-tasks, and a worker given
# --repos-url pulls it. The header lines below make a task and a trigger.
# cron: */2 * * * * *
# name: Hello from a subscribed Python script
from __future__ import annotations

import os
import platform

print(f"hello from {os.environ['QL_TASK_ID']} on Python {platform.python_version()}, "
      f"Run {os.environ['QL_RUN_ID'][:8]}")
