"""What a running process reports to the command that runs it: the observers of `ql serve`
(``profiles/local.LocalObserver``), `ql control` (``profiles/cluster.ControlObserver``) and
`ql worker` receive these, and the commands render them (a surface imports them from here,
not from the layers below)."""

from __future__ import annotations

from qinglong.execution.executor import RunFinished
from qinglong.storage.admission.params import CommitOutcome, CommitResult
from qinglong.storage.runs.params import RescuedAttempt

__all__ = ["CommitOutcome", "CommitResult", "RescuedAttempt", "RunFinished", "admitted_what"]


def admitted_what(result: CommitResult) -> str:
    """What an admission wrote, as a log line names it: ``run ID``, or ``flow run ID`` for an
    occurrence of a trigger that starts a flow."""
    if result.flow_run_id is not None:
        return f"flow run {result.flow_run_id}"
    return f"run {result.run_id}"
