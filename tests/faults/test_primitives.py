"""The fault-injection primitives, proved for real: streaming standbys, synchronous and
asynchronous replication, promotion, multi-host failover in libpq, and a network namespace
that can be partitioned from the host.

Every test makes its own servers in its own temporary directory and stops them by data
directory in a finally block; the teardown then checks that no process still refers to that
directory and that no namespace of the test is left.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from testkit import netns, ports
from testkit.netns import NetNamespace, NetnsError
from testkit.postgres import EmbeddedPostgres
from testkit.replication import (
    Standby,
    replication_status,
    set_asynchronous,
    set_synchronous,
    wait_sync_state,
)
from tests.faults.conftest import wait_for

pytestmark = pytest.mark.slow

WAIT = 30.0  # the bound of every wait that should end quickly


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline.strip()}")
    return found


@dataclass
class Servers:
    """Makes servers under ``work`` and stops them all by data directory at the end."""

    work: Path
    made: list[EmbeddedPostgres] = field(default_factory=list)

    def primary(self, name: str = "primary") -> EmbeddedPostgres:
        server = EmbeddedPostgres(base_dir=self.work / name, fsync=False)
        self.made.append(server)
        return server.start()

    def standby(self, primary: EmbeddedPostgres, name: str = "standby1") -> Standby:
        server = Standby(primary, name, base_dir=self.work / name)
        self.made.append(server)
        return server.start()

    def stop_all(self) -> None:
        for server in reversed(self.made):
            server.cleanup()  # pg_ctl -D <data dir> -m immediate stop


@pytest.fixture
def servers() -> Iterator[Servers]:
    work = Path(tempfile.mkdtemp(prefix="qinglong-faults-"))
    made = Servers(work)
    try:
        yield made
    finally:
        try:
            made.stop_all()
            # pg_ctl returns once the postmaster has removed its pid file; the process itself
            # may still be exiting: wait for that (bounded), then judge
            deadline = time.monotonic() + 10
            while (left := _processes_mentioning(str(work))) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not left, f"processes left behind: {left}"
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _table(primary: EmbeddedPostgres) -> None:
    primary.query("CREATE TABLE probe (id int PRIMARY KEY, note text)")


@dataclass
class Commit:
    """An INSERT and COMMIT on its own connection, in a thread; what the client saw."""

    conn: psycopg.Connection[tuple[Any, ...]]
    row_id: int
    notices: list[tuple[str | None, ...]] = field(default_factory=list)
    error: BaseException | None = None
    returned_after: float | None = None
    thread: threading.Thread | None = None

    @classmethod
    def start(cls, primary: EmbeddedPostgres, row_id: int) -> Commit:
        conn = primary.connect(autocommit=False)
        commit = cls(conn, row_id)
        conn.add_notice_handler(commit._notice)
        commit.thread = threading.Thread(target=commit._run, daemon=True)
        commit.thread.start()
        return commit

    def _notice(self, notice: psycopg.errors.Diagnostic) -> None:
        # A Diagnostic is only readable inside the handler: copy what we need.
        self.notices.append((notice.severity_nonlocalized, notice.sqlstate,
                             notice.message_primary, notice.message_detail))

    @property
    def pid(self) -> int:
        return self.conn.info.backend_pid

    def _run(self) -> None:
        started = time.monotonic()
        try:
            self.conn.execute("INSERT INTO probe VALUES (%s, 'x')", [self.row_id])
            self.conn.commit()
        except BaseException as error:
            self.error = error
        self.returned_after = time.monotonic() - started

    def join(self, timeout: float) -> bool:
        """True when the commit has returned (to the client) within ``timeout``."""
        assert self.thread is not None
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def close(self) -> None:
        """Close the connection; a commit still waiting (a failed test) is cancelled first.
        If it still does not return, the connection is left to the server's stop."""
        if not self.join(0):
            self.conn.cancel_safe(timeout=5)
            if not self.join(WAIT):
                return
        self.conn.close()


def _wait_event(primary: EmbeddedPostgres, pid: int) -> str | None:
    rows = primary.query("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", [pid])
    return None if not rows or rows[0][0] is None else str(rows[0][0])


def _wait_for_syncrep(primary: EmbeddedPostgres, commit: Commit) -> None:
    deadline = time.monotonic() + WAIT
    while _wait_event(primary, commit.pid) != "SyncRep":
        assert commit.thread is not None and commit.thread.is_alive(), (
            f"the commit returned instead of waiting: error={commit.error!r}")
        assert time.monotonic() < deadline, "the commit never waited for the standby"
        time.sleep(0.02)


def _log(server: EmbeddedPostgres) -> str:
    try:
        return (server.data_dir / "server.log").read_text(errors="replace")[-2000:]
    except OSError:
        return ""


def _count(server: EmbeddedPostgres, row_id: int) -> int:
    return int(server.scalar("SELECT count(*) FROM probe WHERE id = %s", [row_id]))


# -- replication ---------------------------------------------------------------------------


def test_a_standby_follows_the_primary(servers: Servers) -> None:
    primary = servers.primary()
    standby = servers.standby(primary)

    assert standby.port != primary.port
    assert standby.data_dir != primary.data_dir
    assert primary.is_in_recovery() is False
    assert standby.is_in_recovery() is True
    rows = wait_sync_state(primary, "async", standby="standby1", timeout=WAIT)
    assert [(row.application_name, row.state) for row in rows] == [("standby1", "streaming")]
    assert standby.scalar("SHOW hot_standby") == "on"
    assert f"port={primary.port}" in str(standby.scalar("SHOW primary_conninfo"))

    _table(primary)
    primary.query("INSERT INTO probe VALUES (1, 'written on the primary')")
    standby.wait_replayed(timeout=WAIT)
    assert standby.query("SELECT note FROM probe WHERE id = 1") == [("written on the primary",)]
    assert standby.replay_lsn() is not None

    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        standby.query("INSERT INTO probe VALUES (2, 'on the standby')")


def test_sync_commit_waits_while_the_standby_is_down(servers: Servers) -> None:
    primary = servers.primary()
    standby = servers.standby(primary)
    rows = set_synchronous(primary, commit="remote_apply", timeout=WAIT)
    assert [(row.application_name, row.sync_state) for row in rows] == [("standby1", "sync")]
    _table(primary)
    assert primary.scalar("SHOW synchronous_commit") == "remote_apply"

    standby.stop()
    commit = Commit.start(primary, 10)
    try:
        _wait_for_syncrep(primary, commit)
        assert not commit.join(1.0), "the commit returned while the sync standby was down"
        assert _count(primary, 10) == 0, "a commit waiting for the standby is visible to others"

        standby.start()
        assert commit.join(WAIT), (
            f"the commit still waits after the standby came back: {replication_status(primary)}"
            f"\n{_log(primary)}\n{_log(standby)}")
        assert commit.error is None
        assert commit.notices == []
        # remote_apply: once the commit returned, the standby has replayed it.
        assert _count(standby, 10) == 1
        assert _count(primary, 10) == 1
    finally:
        commit.close()


def test_a_cancelled_sync_wait_commits_locally_with_a_warning(servers: Servers) -> None:
    primary = servers.primary()
    standby = servers.standby(primary)
    set_synchronous(primary, commit="on", timeout=WAIT)
    _table(primary)

    standby.stop()
    commit = Commit.start(primary, 20)
    try:
        _wait_for_syncrep(primary, commit)
        assert primary.scalar("SELECT pg_cancel_backend(%s)", [commit.pid]) is True
        assert commit.join(WAIT), "the cancelled commit did not return"

        # The client sees success, not an error: the transaction committed locally ...
        assert commit.error is None
        assert commit.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert not commit.conn.broken
        assert _count(primary, 20) == 1
        # ... and the only sign that it may not be on the standby is a WARNING, SQLSTATE 01000.
        assert commit.notices == [(
            "WARNING", "01000",
            "canceling wait for synchronous replication due to user request",
            ("The transaction has already committed locally, but might not have been "
             "replicated to the standby."),
        )]
    finally:
        commit.close()

    standby.start()
    standby.wait_replayed(timeout=WAIT)
    assert _count(standby, 20) == 1


def test_async_commit_does_not_wait_for_a_stopped_standby(servers: Servers) -> None:
    primary = servers.primary()
    standby = servers.standby(primary)
    set_synchronous(primary, timeout=WAIT)
    rows = set_asynchronous(primary, timeout=WAIT)  # and back
    assert [(row.application_name, row.sync_state) for row in rows] == [("standby1", "async")]
    _table(primary)

    standby.stop()
    # pg_ctl waits for the standby's postmaster only; the primary's walsender leaves
    # pg_stat_replication once it has read the standby's goodbye, a moment later
    wait_for(lambda: replication_status(primary) == [], "the walsender to leave", WAIT, 0.02)
    commit = Commit.start(primary, 30)
    try:
        assert commit.join(WAIT), "an asynchronous commit waited for a stopped standby"
        assert commit.error is None
        assert commit.notices == []
        assert _wait_event(primary, commit.pid) != "SyncRep"
        assert _count(primary, 30) == 1
    finally:
        commit.close()
    assert not standby.is_running()


def test_promote_makes_the_standby_a_writable_primary(servers: Servers) -> None:
    primary = servers.primary()
    # Synchronous before the standby exists, so the standby's copy of the configuration
    # says so too: once promoted, it must not wait for standbys of its own.
    set_synchronous(primary, wait=False, timeout=WAIT)
    standby = servers.standby(primary)
    wait_sync_state(primary, "sync", standby="standby1", timeout=WAIT)
    _table(primary)
    primary.query("INSERT INTO probe VALUES (40, 'before the crash')")
    standby.wait_replayed(timeout=WAIT)
    assert _count(standby, 40) == 1

    primary.crash()
    seconds = standby.promote(timeout=WAIT)

    assert 0 < seconds < WAIT
    assert standby.promoted
    assert standby.is_in_recovery() is False
    commit = Commit.start(standby, 41)
    try:
        assert commit.join(WAIT), "a commit on the promoted standby waits for a standby"
        assert commit.error is None
    finally:
        commit.close()
    assert standby.query("SELECT id FROM probe ORDER BY id") == [(40,), (41,)]


def _server_reached(conninfo: str) -> tuple[int, bool]:
    with psycopg.connect(conninfo, connect_timeout=3) as conn:
        row = conn.execute("SELECT inet_server_port(), pg_is_in_recovery()").fetchone()
        assert row is not None
        return int(row[0]), bool(row[1])


def test_multi_host_conninfo_reaches_the_writable_primary(servers: Servers) -> None:
    old = servers.primary()
    new = servers.standby(old)

    def conninfo(*ports: int) -> str:
        hosts = ",".join("127.0.0.1" for _ in ports)
        return (f"host={hosts} port={','.join(map(str, ports))} user=postgres dbname=postgres "
                "target_session_attrs=read-write")

    # Before promotion: the old primary, whichever order the hosts are listed in.
    assert _server_reached(conninfo(old.port, new.port)) == (old.port, False)
    assert _server_reached(conninfo(new.port, old.port)) == (old.port, False)

    # The old primary gone and the standby not promoted yet: no writable server at all.
    old.stop()
    with pytest.raises(psycopg.OperationalError):
        _server_reached(conninfo(old.port, new.port))

    new.promote(timeout=WAIT)
    assert _server_reached(conninfo(old.port, new.port)) == (new.port, False)


# -- network namespaces --------------------------------------------------------------------

PROBE = """
import sys, psycopg
try:
    with psycopg.connect(host=sys.argv[1], port=int(sys.argv[2]), user="postgres",
                         dbname="postgres", connect_timeout=2) as conn:
        print(conn.execute("SELECT host(inet_client_addr())").fetchone()[0])
except psycopg.OperationalError as error:
    print("unreachable:", error)
    sys.exit(3)
"""


def _probe_from(ns: NetNamespace, server: EmbeddedPostgres) -> subprocess.CompletedProcess[str]:
    """A new process inside the namespace connects to ``server`` on the host veth address."""
    return ns.run([sys.executable, "-c", PROBE, ns.host_ip, str(server.port)], timeout=WAIT)


def _host_rules() -> str:
    _, iptables = netns.tools()
    return subprocess.run([iptables, "-w", "5", "-S"], capture_output=True, text=True, check=True,
                          timeout=WAIT).stdout


def test_a_partition_cuts_the_namespace_off_and_heal_restores_it(servers: Servers) -> None:
    ns = NetNamespace()
    try:
        ns.create()
        primary = servers.primary()
        primary.allow_addresses(str(ns.network), listen=[ns.host_ip])  # restarts the server

        reached = _probe_from(ns, primary)
        assert reached.returncode == 0, reached.stdout + reached.stderr
        assert reached.stdout.strip() == ns.namespace_ip

        host_rules = _host_rules()
        ns.partition()
        assert ns.partitioned
        cut = _probe_from(ns, primary)
        assert cut.returncode == 3, cut.stdout + cut.stderr
        assert "timeout" in cut.stdout, cut.stdout
        assert _host_rules() == host_rules, "the partition touched the host firewall"
        assert primary.scalar("SELECT 1") == 1  # the host itself still reaches the server

        ns.heal()
        healed = _probe_from(ns, primary)
        assert healed.returncode == 0, healed.stdout + healed.stderr
        assert healed.stdout.strip() == ns.namespace_ip
    finally:
        ns.destroy()
    assert not ns.exists()


def _links() -> str:
    return subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                          check=True, timeout=WAIT).stdout


def test_namespaces_coexist_and_destroy_leaves_nothing_behind() -> None:
    first, second = NetNamespace(), NetNamespace()
    try:
        first.create()
        second.create()
        assert first.name != second.name
        assert first.host_veth != second.host_veth
        assert not first.network.overlaps(second.network)
        assert {first.name, second.name} <= set(netns.namespaces())
        addresses = first.run(["ip", "-o", "-4", "addr", "show"]).stdout
        assert f"{first.namespace_ip}/30" in addresses and "127.0.0.1/8" in addresses
        assert f"{first.host_veth}@" in _links() and f"{second.host_veth}@" in _links()
    finally:
        first.destroy()
        second.destroy()
    for ns in (first, second):
        assert ns.name not in netns.namespaces()
        assert f"{ns.host_veth}@" not in _links()
        assert not (netns.STATE_DIR / f"{ns.name}.json").exists()
    first.destroy()  # idempotent
    second.destroy()


CRASHER = """
import os, sys
from testkit.netns import NetNamespace
ns = NetNamespace(name=sys.argv[1]).create()
print(ns.host_veth, flush=True)
os._exit(0)  # no destroy(): a crashed run
"""


def test_create_cleans_up_what_a_crashed_run_of_the_same_name_left() -> None:
    name = f"qlcrash{os.getpid()}"
    ns = NetNamespace(name=name)
    sleeper: subprocess.Popen[bytes] | None = None
    try:
        crashed = subprocess.run([sys.executable, "-c", CRASHER, name], capture_output=True,
                                 text=True, timeout=WAIT, check=False)
        assert crashed.returncode == 0, crashed.stderr
        old_veth = crashed.stdout.strip()
        assert name in netns.namespaces() and f"{old_veth}@" in _links()  # the leftovers
        # A process still running inside the leftover namespace (ours, so that we reap it).
        _ip, _ = netns.tools()
        sleeper = subprocess.Popen([_ip, "netns", "exec", name, "sleep", "60"])
        # inside before create() looks: a sleeper still entering the namespace when the
        # leftover is cleaned up would join it afterwards, and nothing would be there to kill
        deadline = time.monotonic() + WAIT
        while not subprocess.run([_ip, "netns", "pids", name], capture_output=True, text=True,
                                 check=False).stdout.split():
            assert sleeper.poll() is None and time.monotonic() < deadline, "the sleeper never got in"
            time.sleep(0.05)

        ns.create()
        assert ns.exists()
        state = (netns.STATE_DIR / f"{name}.json").read_text()
        assert f'"pid": {os.getpid()}' in state
        assert sleeper.wait(WAIT) == -9, "the process left inside the crashed namespace still runs"
    finally:
        ns.destroy()
        netns.sweep_leftovers()  # if the test failed before create(), the leftovers go anyway
        if sleeper is not None and sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait(WAIT)
    assert name not in netns.namespaces()
    assert f"{old_veth}@" not in _links()


def test_without_root_the_error_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    netns.tools.cache_clear()
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    try:
        with pytest.raises(NetnsError, match=r"network namespaces need root: .* uid 1000"):
            NetNamespace().create()
    finally:
        monkeypatch.undo()
        netns.tools.cache_clear()


# -- leftovers -----------------------------------------------------------------------------


OWNER = """
import os, time
from testkit.postgres import EmbeddedPostgres
server = EmbeddedPostgres(fsync=False).start()
print(server.port, server.base_dir, flush=True)
time.sleep(600)
"""


def test_a_server_whose_owner_is_killed_is_stopped_and_removed() -> None:
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        port_text, base = owner.stdout.readline().split()
        port = int(port_text)
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", connect_timeout=5) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        owner.kill()  # SIGKILL: no finally block, no atexit in the owner
        owner.wait(WAIT)
        if owner.stdout is not None:
            owner.stdout.close()
    deadline = time.monotonic() + WAIT
    while (Path(base).exists() or _processes_mentioning(base)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_mentioning(base), "the server outlived its owner"
    assert not Path(base).exists(), "the owner's server directory was left behind"
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", connect_timeout=2)


# -- ports ---------------------------------------------------------------------------------


HOLDER = """
import sys
from testkit.ports import reserve_port
held = reserve_port()
print(held.port, flush=True)
sys.stdin.read()
"""


def test_a_reserved_port_is_never_handed_out_twice_while_held() -> None:
    mine = [ports.reserve_port() for _ in range(20)]
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdin is not None
        theirs = int(holder.stdout.readline())
        numbers = {reservation.port for reservation in mine}
        assert len(numbers) == 20 and theirs not in numbers
        ephemeral = ports._ephemeral_range()
        assert not any(port in ephemeral or port == 5432 for port in [*numbers, theirs])
        # another process's reservation cannot be taken while it lives (flock), and is free
        # again once it is gone; ours, once released
        assert ports._lock(theirs) is None
        assert ports._lock(mine[0].port) is None
        holder.stdin.close()
        assert holder.wait(WAIT) == 0
        fd = ports._lock(theirs)
        assert fd is not None
        os.close(fd)
        mine[0].release()
        fd = ports._lock(mine[0].port)
        assert fd is not None
        os.close(fd)
    finally:
        holder.kill()
        holder.wait(WAIT)
        for pipe in (holder.stdin, holder.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()
        for reservation in mine:
            reservation.release()


def test_a_server_whose_port_was_taken_starts_on_another(servers: Servers) -> None:
    server = EmbeddedPostgres(base_dir=servers.work / "taken", fsync=False)
    servers.made.append(server)
    wanted = server.port
    # A program outside the harness listens on the reserved port before the server binds it.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", wanted))
        squatter.listen(1)
        server.start()
        assert server.port != wanted
        assert "Address already in use" in (server.data_dir / "server.log").read_text()
        assert server.scalar("SELECT 1") == 1
        assert server.scalar("SELECT current_setting('port')::int") == server.port
