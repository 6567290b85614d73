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
from tests.faults.conftest import LEASE_MS, FaultBed

pytestmark = pytest.mark.slow

TRIGGERS = 30
STORM_S = 8.0


# single: one row per claim statement, so every admission is a batch of one (its own
# SERIALIZABLE transaction, retried before COMMIT, which the storm makes fail serialization);
# batched: a claim's rows commit together, locked within milliseconds of the claim, so a
# 30 ms pause after each claim opens the window in which a republish fences claims in flight.
MODES = {
    "single": ("--batch", "1", "--hold-in-tx-ms", "30"),
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

    stormer = threading.Thread(target=storm)
    stormer.start()
    time.sleep(STORM_S)
    # Whether a republish lands inside a claim's window is chance (a clean-clone run once saw
    # none in 8 s of the batched mode): storm on, up to twice as long again, until one did.
    deadline = time.monotonic() + 2 * STORM_S
    while time.monotonic() < deadline and not any(
            e.get("event") == "raced" for r in replicas for e in r.events()):
        time.sleep(0.25)
    stop.set()
    stormer.join(10)
    time.sleep(LEASE_MS / 1000 + 2)
    retried: dict[str, float] = {}
    for replica in replicas:
        for labels, value in replica.metric("ql_admission_retries_total").items():
            retried[labels] = retried.get(labels, 0) + value
    assert bed.stop_all() == [0, 0, 0]
    assert changes["republish"] + changes["disable"] + changes["enable"] >= 60, changes
    bed.assert_exactly_once(start)
    raced = [e for r in replicas for e in r.events() if e.get("event") == "raced"]
    assert raced, "the storm should have fenced some claims in flight"
    # and made admissions fail serialization (40001) or deadlock (40P01): before COMMIT they
    # are retried; a COMMIT the server refused is raced and the occurrence decided again
    conflicts = sum(v for k, v in retried.items() if "40001" in k or "40P01" in k) + sum(
        1 for e in raced if str(e.get("reason", "")).startswith("commit_rejected_40"))
    if mode == "single":  # (a batch rarely conflicts: its UPDATE finds rows by their address)
        assert conflicts > 0, (retried, Counter(e.get("reason") for e in raced))
    print(f"storm: {changes}, {len(raced)} raced "
          f"({dict(Counter(e.get('reason') for e in raced))}), retried {retried}")
