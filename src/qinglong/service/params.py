"""The parameters of the use cases that take one object: ``Catalog``'s trigger publish, pause
and resume and project pause and resume, ``RunViews.run_list``. A surface builds them from its
input and imports them from here; the stores they reach define them."""

from __future__ import annotations

from qinglong.storage.definitions.params import (
    ProjectPauseParams,
    TriggerPauseParams,
    TriggerPublishParams,
    TriggerResumeParams,
)
from qinglong.storage.runs.params import RunListParams

__all__ = ["ProjectPauseParams", "RunListParams", "TriggerPauseParams", "TriggerPublishParams",
           "TriggerResumeParams"]
