"""A `ql control` replica LISTENs for publishes: idle, it sleeps until the next due instant
(at most the 5 s idle cap) instead of polling at its interval, and a publish wakes it at
once; without its LISTEN connection it falls back to the interval."""

from __future__ import annotations

import time

from tests.integration.conftest import Cluster
from tests.integration.test_control import Running, start, wait_for


def wakeups(running: Running) -> dict[str, object]:
    found = running.status()["wakeups"]
    assert isinstance(found, dict)
    return found


def listening(running: Running) -> bool:
    return bool(wakeups(running)["listening"])


def cycles(running: Running) -> int:
    """Scheduler cycles so far (0 before the replica's activation: no stats yet)."""
    return int(running.status()["stats"].get("cycles", 0))


def initialised_at(cluster: Cluster, trigger: str) -> bool:
    return cluster.count("trigger_schedules",
                         "trigger_id = %s AND next_fire_at_ms IS NOT NULL", [trigger]) == 1


def test_an_idle_listening_replica_sleeps_up_to_the_idle_cap(
        cluster: Cluster, controls: list[Running]) -> None:
    running = start(cluster)  # interval 250 ms: four looks a second without LISTEN
    controls.append(running)
    wait_for(running.ready, "readyz 200")
    wait_for(lambda: listening(running), "the LISTEN connection")
    time.sleep(0.5)
    before = cycles(running)
    time.sleep(10.5)
    looked = cycles(running) - before
    # nothing is scheduled: one look per 5 s, 2 or 3 in 10.5 s (42 at the interval); one
    # late look on a loaded machine leaves 1, and the replica never stops looking
    assert 1 <= looked <= 4, looked


def test_a_publish_wakes_a_sleeping_replica_at_once(cluster: Cluster,
                                                     controls: list[Running]) -> None:
    running = start(cluster)
    controls.append(running)
    wait_for(running.ready, "readyz 200")
    wait_for(lambda: listening(running), "the LISTEN connection")
    for trigger in ("w1", "w2"):
        # publish right after a look: the idle cap alone would next look 5 s later
        before = cycles(running)
        wait_for(lambda b=before: cycles(running) > b, "an idle look", timeout=10)
        heard = int(wakeups(running)["notifications"])  # type: ignore[call-overload]
        published = time.monotonic()
        cluster.publish(trigger)
        wait_for(lambda t=trigger: initialised_at(cluster, t), f"{trigger} claimed", timeout=10)
        assert time.monotonic() - published < 3.5  # the idle cap: about 5 s
        assert int(wakeups(running)["notifications"]) > heard  # type: ignore[call-overload]
    wait_for(lambda: cluster.count("runs", "trigger_id = 'w2'") >= 2, "w2 admitted")


def test_without_its_listen_connection_the_replica_polls_then_listens_again(
        cluster: Cluster, controls: list[Running]) -> None:
    running = start(cluster)
    controls.append(running)
    wait_for(running.ready, "readyz 200")
    wait_for(lambda: listening(running), "the LISTEN connection")
    cut = cluster.db.execute(
        "SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity "
        "WHERE datname = current_database() AND application_name LIKE 'ql-listen:%%'")
    assert [row["done"] for row in cut] == [True]
    wait_for(lambda: not listening(running), "the lost LISTEN noticed", timeout=5)
    wait_for(lambda: listening(running), "LISTEN again", timeout=10)
    heard = int(wakeups(running)["notifications"])  # type: ignore[call-overload]
    cluster.publish("w3")
    wait_for(lambda: int(wakeups(running)["notifications"]) > heard,  # type: ignore[call-overload]
             "a notification on the new connection", timeout=5)
    wait_for(lambda: initialised_at(cluster, "w3"), "w3 claimed", timeout=5)
