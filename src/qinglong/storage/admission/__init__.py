"""Admission: every way a Run comes into being, written once over the kernel.

- ``ScheduleStore`` (schedules.py): claim due schedule rows, commit the decisions made about
  them (batch.py), with a lost COMMIT reply resolved from durable facts;
- ``RequestAdmissions`` (on_request.py): run now and backfill;
- the one writer every admission goes through (writes.py), and the checks an admission on
  request re-reads first (requests.py).
"""

from __future__ import annotations

from qinglong.storage.admission.on_request import RequestAdmissions
from qinglong.storage.admission.schedules import ScheduleStore

__all__ = ["RequestAdmissions", "ScheduleStore"]
