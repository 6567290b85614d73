"""A `ql control` replica with fault-injection seams wired in, for the fault tests and the soak.

    python -m testkit.replica [--hold-in-tx-ms N] [--hold-fraction F]
                              [--pause-after-claim-ms N] [--ack-ledger FILE] -- CONTROL-ARGS...

Everything after ``--`` is parsed by `ql control` itself and runs its code path unchanged;
the options before it become `ControlSeams`:

- ``--hold-in-tx-ms``: hold each admission transaction open this long before COMMIT (all of
  them, or a random ``--hold-fraction`` of them), so kills and partitions land inside it;
- ``--pause-after-claim-ms``: pause this long after every claim that returned rows;
- ``--ack-ledger``: append each acknowledged (committed and durable) admission to this file,
  one JSON object per line, so the audit can check what the scheduler told the outside world.

Production `ql control` has none of these options.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
from collections.abc import Callable

from qinglong.clock import pause
from qinglong.domain.decision import Decision
from qinglong.domain.schedule import ScheduleClaim
from qinglong.storage.admission.params import CommitOutcome, CommitResult


def pause_for(ms: int, fraction: float = 1.0) -> Callable[[], None] | None:
    if ms <= 0 or fraction <= 0:
        return None
    chance = random.Random()

    def hold() -> None:
        if fraction >= 1 or chance.random() < fraction:
            pause(ms / 1000)

    return hold


class AckLedger:
    """Appends every acknowledged (committed and durable) admission to a file."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()

    def record(self, claim: ScheduleClaim, decision: Decision, result: CommitResult) -> None:
        if result.outcome is not CommitOutcome.ADMITTED or not result.durable:
            return
        line = json.dumps({
            "project": claim.candidate.project_id, "trigger": claim.candidate.trigger_id,
            "trigger_revision": claim.candidate.trigger_revision,
            "scheduled_for_ms": decision.scheduled_for_ms,
            # the Run, or the flow run an occurrence of a flow trigger started
            "run_id": result.run_id or result.flow_run_id,
            "claim_token": claim.fence.token, "claim_version": claim.fence.version,
            "owner": claim.fence.owner, "in_doubt": result.in_doubt,
        }, sort_keys=True) + "\n"
        with self._lock:
            os.write(self._fd, line.encode())


SEAM_OPTIONS = ("--hold-in-tx-ms", "--hold-fraction", "--pause-after-claim-ms", "--ack-ledger")


def main(argv: list[str] | None = None) -> None:
    from qinglong.cli.commands.control import control, run_control
    from qinglong.cli.main import main as ql_main
    from qinglong.profiles.cluster import ControlSeams

    args = list(sys.argv[1:] if argv is None else argv)
    split = args.index("--") if "--" in args else len(args)
    parser = argparse.ArgumentParser(prog="python -m testkit.replica")
    parser.add_argument("--hold-in-tx-ms", type=int, default=0)
    parser.add_argument("--hold-fraction", type=float, default=1.0)
    parser.add_argument("--pause-after-claim-ms", type=int, default=0)
    parser.add_argument("--ack-ledger")
    seams_given = parser.parse_args(args[:split])
    control_args = args[split + 1:]
    ledger = AckLedger(seams_given.ack_ledger) if seams_given.ack_ledger else None
    seams = ControlSeams(
        before_commit=pause_for(seams_given.hold_in_tx_ms, seams_given.hold_fraction),
        after_claim=pause_for(seams_given.pause_after_claim_ms),
        on_committed=ledger.record if ledger is not None else None,
    )

    def replica(**params: object) -> None:
        json_events = bool(params.pop("json_events"))
        log_admissions = bool(params.pop("log_admissions"))
        run_control(params, json_events=json_events, log_admissions=log_admissions, seams=seams)

    control.callback = replica  # parse exactly as `ql control` does, then run with the seams
    ql_main(["control", *control_args])


if __name__ == "__main__":
    main()
