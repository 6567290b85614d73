"""F10: a serialization and deadlock storm. Three replicas with batched claims admit 30
per-second triggers while an admin process republishes, disables and re-enables random
triggers twenty times a second. Every republish fences the claims in flight, and some
admissions fail serialization and are retried (counted in /metrics); the audit must still
find every occurrence of every revision exactly once (or explained by the revision ending
before it was due)."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest

from qinglong.errors import QinglongError
from qinglong.storage.definitions.params import TriggerPublishParams
from tests.faults.conftest import AUDIT_SETTLE_MS, FaultBed, wait_for

pytestmark = pytest.mark.slow

TRIGGERS = 30
MIN_CHANGES = 60  # republishes, disables and enables, at least
STORM_S = 24.0  # the most the storm lasts while what the test judges has not happened yet


# single: one row per claim statement, so every admission is a batch of one (its own
# SERIALIZABLE transaction, retried before COMMIT, which the storm makes fail serialization);
# batched: a claim's rows commit together, locked within milliseconds of the claim. In both,
# a 30 ms pause after each claim opens the window in which a republish fences claims in
# flight (without it, single mode's claims commit so soon after they are taken that a clean
# clone once saw no claim fenced in 24 s of storm).
MODES = {
    "single": ("--batch", "1", "--hold-in-tx-ms", "30", "--pause-after-claim-ms", "30"),
    "batched": ("--batch", "8", "--hold-in-tx-ms", "30", "--pause-after-claim-ms", "30"),
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_f10_republish_storm_under_three_replicas(bed: FaultBed, mode: str) -> None:
    for i in range(TRIGGERS):
        bed.publish(f"t{i:02d}")
    start = bed.now()
    # Admissions held open 30 ms before COMMIT overlap the republishes more often.
    replicas = [bed.replica(name, *MODES[mode]).start() for name in ("a", "b", "c")]
    for replica in replicas:
        replica.wait_ready()
    rng = random.Random(20261130)
    changes = {"republish": 0, "disable": 0, "enable": 0, "conflict": 0}
    stop = threading.Event()

    def storm() -> None:
        enabled = {f"t{i:02d}": True for i in range(TRIGGERS)}
        while not stop.is_set():
            trigger = f"t{rng.randrange(TRIGGERS):02d}"
            action = rng.choice(["republish", "republish", "republish", "toggle"])
            try:
                if action == "republish" and enabled[trigger]:
                    cron = rng.choice(["* * * * * *", "*/2 * * * * *", "1-59 * * * * *"])
                    bed.admin.trigger_publish(TriggerPublishParams(
                        project_id="demo", trigger_id=trigger, expression=cron))
                    changes["republish"] += 1
                else:
                    enabled[trigger] = not enabled[trigger]
                    bed.admin.trigger_publish(TriggerPublishParams(
                        project_id="demo", trigger_id=trigger, enabled=enabled[trigger]))
                    changes["enable" if enabled[trigger] else "disable"] += 1
            except QinglongError:
                changes["conflict"] += 1  # a publish that lost a race; the publisher retried
            stop.wait(0.05)

    def retried() -> dict[str, float]:
        found: dict[str, float] = {}
        for replica in replicas:
            for labels, value in replica.metric("ql_admission_retries_total").items():
                found[labels] = found.get(labels, 0) + value
        return found

    def conflicts(retries: dict[str, float], raced: list[dict[str, object]]) -> float:
        # admissions that failed serialization (40001) or deadlock (40P01): before COMMIT
        # they are retried; a COMMIT the server refused is raced and the occurrence decided
        # again
        return sum(v for k, v in retries.items() if "40001" in k or "40P01" in k) + sum(
            1 for e in raced if str(e.get("reason", "")).startswith("commit_rejected_40"))

    def raced_now() -> list[dict[str, object]]:
        return [e for r in replicas for e in r.events() if e.get("event") == "raced"]

    def storm_did_its_work() -> bool:
        """What the test judges has happened: the changes, a claim fenced in flight, and
        (one row per claim) a conflict. Whether a republish lands inside a claim's window
        is chance (a clean-clone run once saw none in 8 s of the batched mode)."""
        if changes["republish"] + changes["disable"] + changes["enable"] < MIN_CHANGES:
            return False
        raced = raced_now()
        return bool(raced) and (mode != "single" or conflicts(retried(), raced) > 0)

    stormer = threading.Thread(target=storm)
    stormer.start()
    try:
        # storm on until it did its work, or for STORM_S at most (then the asserts say what
        # did not happen)
        deadline = time.monotonic() + STORM_S
        while not storm_did_its_work() and time.monotonic() < deadline:
            time.sleep(0.25)
    finally:
        stop.set()
        stormer.join(10)
    # The window judged ends with the storm, once the cluster has decided every occurrence
    # due by then (every claim the storm fenced among them). Judged up to the last stop
    # instead, the replica stopped last, carrying all 30 triggers alone at 60 ms a claim
    # while the others shut down, could be behind at its stop by more than the audit's
    # settle time on a loaded machine (a clean-clone run saw four triggers' last second
    # undecided): lag, not loss.
    storm_end = bed.now()
    wait_for(lambda: bed.undecided_by(storm_end) == 0,
             "the cluster to decide every occurrence due by the storm's end", timeout=60)
    retries = retried()
    assert bed.stop_all(settle=False) == [0, 0, 0]
    assert changes["republish"] + changes["disable"] + changes["enable"] >= MIN_CHANGES, changes
    bed.assert_exactly_once(start, storm_end + AUDIT_SETTLE_MS)
    raced = raced_now()
    assert raced, "the storm should have fenced some claims in flight"
    # and made admissions fail serialization or deadlock
    if mode == "single":  # (a batch rarely conflicts: its UPDATE finds rows by their address)
        assert conflicts(retries, raced) > 0, (retries, Counter(e.get("reason") for e in raced))
    print(f"storm: {changes}, {len(raced)} raced "
          f"({dict(Counter(e.get('reason') for e in raced))}), retried {retries}")
