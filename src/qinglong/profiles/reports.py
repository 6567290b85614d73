"""What a running process reports to the command that runs it: the observers of `ql serve`
(``profiles/local.LocalObserver``), `ql control` (``profiles/cluster.ControlObserver``) and
`ql worker` receive these, and the commands render them (a surface imports them from here,
not from the layers below)."""

from __future__ import annotations

from qinglong.execution.executor import RunFinished
from qinglong.storage.admission.params import CommitOutcome, CommitResult
from qinglong.storage.runs.params import RescuedAttempt

__all__ = ["CommitOutcome", "CommitResult", "RescuedAttempt", "RunFinished"]
