"""Issue 18, item 3, at the store: an instance id is held by one live process at a time, on
every database. A second holder is refused while the first one's heartbeat is younger than
INSTANCE_STALE_MS (by the store's clock), a stale or cleanly stopped registration is free, a
process registers again as itself (resume), and heartbeats and stops touch only the
registration their own store made: a process never marks another one stopped."""

from __future__ import annotations

import pytest

from qinglong.errors import InstanceHeld
from qinglong.storage.instances import INSTANCE_STALE_MS, Instance, InstanceStore
from tests.contract.conftest import Backend


class Stores:
    """Instance stores on one backend, as separate processes would each have their own
    (on PostgreSQL each over a connection of its own, as ql_worker)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def new(self) -> InstanceStore:
        return InstanceStore(self.backend.database("ql_worker", "inst"))

    def silence(self, ms: int) -> None:
        """Let ``ms`` pass without a heartbeat, in the clock the store judges age by: the
        rows are made that much older (the same on every database, whose clock may be
        real)."""
        self.backend.sql("UPDATE instances SET seen_at_ms = seen_at_ms - ?, "
                         "started_at_ms = started_at_ms - ?", ms, ms)

    def row(self, instance_id: str) -> Instance:
        [found] = [i for i in self.new().instance_list() if i.instance_id == instance_id]
        return found


@pytest.fixture
def stores(backend: Backend) -> Stores:
    return Stores(backend)


def test_an_id_a_live_process_holds_is_refused_naming_the_holder(stores: Stores) -> None:
    first, second = stores.new(), stores.new()
    first.instance_start("c1", "control", "host-a", 101)
    with pytest.raises(InstanceHeld) as refused:
        second.instance_start("c1", "control", "host-b", 202)
    held = refused.value
    assert (held.code, held.instance_id, held.role, held.host, held.pid) == (
        "QL_INSTANCE_HELD", "c1", "control", "host-a", 101)
    assert held.silent_ms < INSTANCE_STALE_MS
    assert "pid 101 on host-a" in held.message and "30 s" in held.message
    # the refused process never registered: its beat is refused, its stop changes nothing
    assert second.instance_beat("c1") is False
    second.instance_stop("c1")
    row = stores.row("c1")
    assert (row.host, row.pid, row.stopped_at_ms) == ("host-a", 101, None)
    assert first.instance_beat("c1") is True


def test_a_cleanly_stopped_id_is_free_at_once(stores: Stores) -> None:
    first, second = stores.new(), stores.new()
    first.instance_start("w1", "worker", "host-a", 101)
    first.instance_stop("w1")
    second.instance_start("w1", "worker", "host-b", 202)
    # the first process, stopping or beating again, does not touch the second's registration
    first.instance_stop("w1")
    assert first.instance_beat("w1") is False
    row = stores.row("w1")
    assert (row.host, row.pid, row.stopped_at_ms) == ("host-b", 202, None)


def test_a_crashed_holders_id_is_taken_over_once_its_heartbeat_is_stale(stores: Stores) -> None:
    crashed, restarted = stores.new(), stores.new()
    crashed.instance_start("c1", "control", "host-a", 101)
    stores.silence(INSTANCE_STALE_MS - 1_000)
    with pytest.raises(InstanceHeld):
        restarted.instance_start("c1", "control", "host-a", 102)
    stores.silence(1_000)
    restarted.instance_start("c1", "control", "host-a", 102)
    row = stores.row("c1")
    assert (row.pid, row.stopped_at_ms) == (102, None)
    # the old holder (paused, not dead after all) finds it has lost the id, and its stop
    # does not mark the live one stopped
    assert crashed.instance_beat("c1") is False
    crashed.instance_stop("c1")
    assert stores.row("c1").stopped_at_ms is None
    assert restarted.instance_beat("c1") is True


def test_a_process_registers_again_as_itself_after_losing_the_database(stores: Stores) -> None:
    before = stores.new()
    registration = before.instance_start("c1", "control", "host-a", 101)
    after = stores.new()  # a fresh activation: new connections, a new store
    with pytest.raises(InstanceHeld):
        after.instance_start("c1", "control", "host-a", 101)  # not as itself: refused
    again = after.instance_start("c1", "control", "host-a", 101, resume=registration)
    assert again == registration  # the same process: the same start
    assert after.instance_beat("c1") is True
    # resuming someone else's registration is refused
    with pytest.raises(InstanceHeld):
        stores.new().instance_start("c1", "control", "host-b", 202, resume=registration)


def test_a_locked_start_takes_over_its_own_roles_registration_only(stores: Stores) -> None:
    stores.new().instance_start("serve", "serve", "host-a", 101)  # a crashed `ql serve`
    server = stores.new()
    server.instance_start("serve", "serve", "host-a", 102, locked=True)  # its file lock held
    assert stores.row("serve").pid == 102
    stores.new().instance_start("web-1", "web", "host-a", 103)
    with pytest.raises(InstanceHeld):
        server.instance_start("web-1", "serve", "host-a", 102, locked=True)
