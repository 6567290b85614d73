"""The short soak (40 s, flows in its mix) that runs in `make test`; `make soak` runs
the long one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testkit.soak import SoakConfig, print_result, run_soak

pytestmark = pytest.mark.slow


def test_a_short_chaos_soak_keeps_every_invariant(tmp_path: Path) -> None:
    # 40 s in `make test` (its 15-minute budget); `make soak` runs the 10-minute one
    seconds = float(os.environ.get("QL_SHORT_SOAK_SECONDS", "40"))
    result = run_soak(SoakConfig(replicas=3, triggers=20, seconds=seconds, work_dir=tmp_path))
    print_result(result)
    assert sum(result.faults.values()) >= seconds / 5  # chaos really happened
    assert result.faults["database_restart"] == 1
    assert result.figures["occurrences_expected"] >= 20 * (seconds - 10)
    # the workers executed the Runs and the commands wrote their ledger (W2 judged something)
    assert result.figures["runs_with_command_output"] >= 0.9 * result.figures["runs_executed"]
    assert result.figures["runs_executed"] >= result.figures["runs_admitted"]
    # flows ran through the chaos: every started flow run decided all five of its nodes
    assert result.figures["flow_runs"] >= seconds / 4
    assert (result.figures["flow_steps_released"] + result.figures["flow_steps_skipped"]
            == 5 * result.figures["flow_runs"])
    assert result.ok, (result.seed, [name for name, held in result.invariants.items() if not held])
