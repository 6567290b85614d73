"""A network namespace joined to the host by a veth pair, for partition tests.

One `NetNamespace` holds one replica (or any process) off the host's loopback: the host end
of the veth gets ``10.213.B.1/30`` and the namespace end ``10.213.B.2/30`` (B numbers the
/30 block, so several namespaces coexist). A server on the host that should be reachable
from the namespace listens on `host_ip` and trusts `network` (see
`testkit.postgres.EmbeddedPostgres.allow_addresses`). Processes run inside with
``[*ns.prefix, program, ...]``. `partition` drops every packet on the namespace's end of the
link with iptables *inside the namespace*, so the host's own firewall is never touched;
`heal` flushes those rules. Traffic stays on this machine: the only addresses involved are
the namespace's own pair and loopback.

Needs root, ``ip`` (iproute2) and ``iptables``; a missing tool is installed with apt-get when
we are root. Anything that prevents a namespace raises `NetnsError` saying why: tests fail
loudly, they never skip.

Each namespace records its owner (pid and process start time) in ``/run/qinglong-netns``.
`create` removes leftovers of owners that are gone (a crashed run), and a namespace of the
same name that nobody owns, before it makes its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

SUPERNET = ipaddress.IPv4Network("10.213.0.0/16")
BLOCKS = SUPERNET.num_addresses // 4
STATE_DIR = Path("/run/qinglong-netns")
NAME_PREFIX = "qlns"
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_AUTO_NAME = re.compile(NAME_PREFIX + r"(\d+)")
_SBIN = "/usr/local/sbin:/usr/sbin:/sbin"


class NetnsError(RuntimeError):
    """A network namespace could not be created or used; the message says why."""


def _which(binary: str) -> str | None:
    path = os.environ.get("PATH", "") + os.pathsep + _SBIN
    return shutil.which(binary, path=path)


def _apt_install(package: str) -> str:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", package]
    try:
        done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600,
                              check=False)
        if done.returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, timeout=600,
                           check=False)
            done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600,
                                  check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    return "" if done.returncode == 0 else done.stderr.strip()[-500:]


@functools.cache
def tools() -> tuple[str, str]:
    """The paths of ``ip`` and ``iptables``, installing them if missing; `NetnsError` if we
    are not root or they cannot be had."""
    if os.geteuid() != 0:
        raise NetnsError(f"network namespaces need root: this process runs as uid {os.geteuid()}, "
                         "and `ip netns add`, veth pairs and iptables need CAP_SYS_ADMIN and "
                         "CAP_NET_ADMIN")
    found: list[str] = []
    for binary, package in (("ip", "iproute2"), ("iptables", "iptables")):
        path = _which(binary)
        if path is None:
            problem = _apt_install(package)
            path = _which(binary)
            if path is None:
                raise NetnsError(f"`{binary}` is missing and `apt-get install -y {package}` did "
                                 f"not provide it: {problem or 'no error, but no binary'}")
        found.append(path)
    return found[0], found[1]


def _run(*argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise NetnsError(f"`{' '.join(argv)}` failed (exit {done.returncode}): "
                         f"{done.stderr.strip() or done.stdout.strip()}")
    return done


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (to tell it from a later process with its pid)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def namespaces() -> list[str]:
    """The names of the network namespaces ``ip netns`` knows."""
    ip, _ = tools()
    done = _run(ip, "netns", "list")
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]


def _links() -> set[str]:
    ip, _ = tools()
    done = _run(ip, "-o", "link", "show")
    return {line.split(":")[1].strip().split("@")[0] for line in done.stdout.splitlines()}


def _used_blocks() -> set[int]:
    """/30 blocks of 10.213.0.0/16 already on a host interface."""
    ip, _ = tools()
    done = _run(ip, "-o", "-4", "addr", "show")
    used: set[int] = set()
    for match in re.finditer(r"\binet (\d+\.\d+\.\d+\.\d+)", done.stdout):
        address = ipaddress.IPv4Address(match.group(1))
        if address in SUPERNET:
            used.add((int(address) - int(SUPERNET.network_address)) // 4)
    return used


@contextlib.contextmanager
def _state_lock() -> Iterator[None]:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with (STATE_DIR / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _read_state(path: Path) -> dict[str, Any] | None:
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _owner_alive(state: dict[str, Any]) -> bool:
    pid = state.get("pid")
    return isinstance(pid, int) and _start_time(pid) == state.get("start_time")


def _kill_inside(ip: str, name: str, timeout: float = 5.0) -> None:
    """SIGKILL the processes still running in namespace ``name`` (ours), by pid, and wait
    until none is left (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        done = _run(ip, "netns", "pids", name, check=False)
        pids = [int(word) for word in done.stdout.split() if word.isdigit()]
        if not pids or time.monotonic() >= deadline:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _remove(name: str, host_veth: str | None) -> None:
    """Remove namespace ``name`` and the veth pair; a missing part is fine."""
    ip, _ = tools()
    if name in namespaces():
        _kill_inside(ip, name)
    if host_veth and host_veth in _links():
        _run(ip, "link", "del", host_veth, check=False)
    if name in namespaces():
        _run(ip, "netns", "del", name)


def _sweep() -> list[str]:
    """Remove what owners that have exited left behind (the state lock is held)."""
    removed = []
    live_veths = set()
    for path in sorted(STATE_DIR.glob("*.json")):
        state = _read_state(path)
        if state is not None and _owner_alive(state):
            live_veths.add(str(state.get("host_veth")))
            continue
        name = str(state["name"]) if state else path.stem
        _remove(name, str(state["host_veth"]) if state else None)
        path.unlink(missing_ok=True)
        removed.append(name)
    # Our automatic names with no owner record: a creator writes the record before
    # `ip netns add` (under the lock), so these were left by something that lost it.
    for name in namespaces():
        match = _AUTO_NAME.fullmatch(name)
        if match and not (STATE_DIR / f"{name}.json").exists():
            _remove(name, f"qlh{match.group(1)}")
            removed.append(name)
    ip, _ = tools()
    for link in _links():
        if re.fullmatch(r"qlh\d+", link) and link not in live_veths:
            _run(ip, "link", "del", link, check=False)  # a host end whose owner is gone
            removed.append(link)
    return removed


def sweep_leftovers() -> list[str]:
    """Remove the namespaces and veths of owners that have exited; their names."""
    tools()
    with _state_lock():
        return _sweep()


@dataclass
class NetNamespace:
    """A network namespace with a veth pair to the host. ``name`` defaults to ``qlns<B>``
    where B is the first free /30 block of 10.213.0.0/16."""

    name: str | None = None
    block: int | None = None
    created: bool = field(init=False, default=False)
    _partitioned: bool = field(init=False, default=False)

    # -- addresses and names ----------------------------------------------------------

    def _require_block(self) -> int:
        if self.block is None:
            raise NetnsError("the namespace has no address block yet: call create() first")
        return self.block

    @property
    def network(self) -> ipaddress.IPv4Network:
        """The /30 of the link, e.g. 10.213.0.0/30 (trust this on the server)."""
        base = int(SUPERNET.network_address) + 4 * self._require_block()
        return ipaddress.IPv4Network((base, 30))

    @property
    def host_ip(self) -> str:
        """The host end's address (a server on the host listens here), e.g. 10.213.0.1."""
        return str(self.network.network_address + 1)

    @property
    def namespace_ip(self) -> str:
        """The namespace end's address, e.g. 10.213.0.2."""
        return str(self.network.network_address + 2)

    @property
    def host_address(self) -> str:
        return f"{self.host_ip}/30"

    @property
    def namespace_address(self) -> str:
        return f"{self.namespace_ip}/30"

    @property
    def host_veth(self) -> str:
        return f"qlh{self._require_block()}"

    @property
    def namespace_veth(self) -> str:
        return f"qln{self._require_block()}"

    @property
    def prefix(self) -> list[str]:
        """The command prefix that runs a program inside the namespace:
        ``[<path of ip>, "netns", "exec", name]``."""
        if not self.created or self.name is None:
            raise NetnsError("the namespace does not exist: call create() first")
        ip, _ = tools()
        return [ip, "netns", "exec", self.name]

    def _state_path(self) -> Path:
        return STATE_DIR / f"{self.name}.json"

    # -- life cycle ---------------------------------------------------------------------

    def create(self, timeout: float = 10.0) -> Self:
        ip, _ = tools()
        if self.name is not None and not _NAME.fullmatch(self.name):
            raise NetnsError(f"namespace name {self.name!r}: use letters, digits, '_', '.', '-'")
        with _state_lock():
            self._clean_leftovers()
            if self.block is None:
                self.block = self._free_block()
            elif not 0 <= self.block < BLOCKS:
                raise NetnsError(f"block {self.block}: 0..{BLOCKS - 1}")
            if self.name is None:
                self.name = f"{NAME_PREFIX}{self.block}"
            if self.host_veth in _links() or self.block in _used_blocks():
                raise NetnsError(f"{self.network} or {self.host_veth} is already in use on the host")
            self._state_path().write_text(json.dumps({
                "name": self.name, "block": self.block, "host_veth": self.host_veth,
                "pid": os.getpid(), "start_time": _start_time(os.getpid())}))
            try:
                self._build(ip, timeout)
            except BaseException:
                _remove(self.name, self.host_veth)
                self._state_path().unlink(missing_ok=True)
                raise
        self.created = True
        return self

    def _clean_leftovers(self) -> None:
        _sweep()
        if self.name is None:
            return
        state = _read_state(self._state_path())
        if state is not None and _owner_alive(state):
            raise NetnsError(f"namespace {self.name!r} belongs to the running process "
                             f"{state.get('pid')}: pick another name")
        if self.name in namespaces():
            _remove(self.name, None)  # the same name, owned by nobody: a leftover

    def _free_block(self) -> int:
        taken = _used_blocks()
        links = _links()
        names = set(namespaces())
        for block in range(BLOCKS):
            if (block not in taken and f"qlh{block}" not in links
                    and f"{NAME_PREFIX}{block}" not in names):
                return block
        raise NetnsError(f"no free /30 block left in {SUPERNET}")

    def _build(self, ip: str, timeout: float) -> None:
        assert self.name is not None
        done = _run(ip, "netns", "add", self.name, check=False)
        if done.returncode != 0:
            raise NetnsError(f"`ip netns add {self.name}` failed: {done.stderr.strip()} (network "
                             "namespaces need root with CAP_SYS_ADMIN, a writable /run/netns "
                             "and a kernel with CONFIG_NET_NS)")
        _run(ip, "link", "add", self.host_veth, "type", "veth",
             "peer", "name", self.namespace_veth, "netns", self.name)
        _run(ip, "addr", "add", self.host_address, "dev", self.host_veth)
        _run(ip, "link", "set", self.host_veth, "up")
        _run(ip, "-n", self.name, "addr", "add", self.namespace_address, "dev", self.namespace_veth)
        _run(ip, "-n", self.name, "link", "set", "lo", "up")
        _run(ip, "-n", self.name, "link", "set", self.namespace_veth, "up")
        deadline = time.monotonic() + timeout
        while True:
            host = _run(ip, "-o", "link", "show", self.host_veth).stdout
            inside = _run(ip, "-n", self.name, "-o", "link", "show", self.namespace_veth).stdout
            if "LOWER_UP" in host and "LOWER_UP" in inside:
                return
            if time.monotonic() >= deadline:
                raise NetnsError(f"the veth pair {self.host_veth}/{self.namespace_veth} did not "
                                 f"come up within {timeout} s: {host.strip()} | {inside.strip()}")
            time.sleep(0.02)

    def run(self, argv: Sequence[str], timeout: float = 60,
            **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside the namespace and wait for it (output captured as text)."""
        return subprocess.run([*self.prefix, *argv], capture_output=True, text=True,
                              timeout=timeout, check=False, **kwargs)

    def exists(self) -> bool:
        return self.name is not None and self.name in namespaces()

    # -- faults ---------------------------------------------------------------------------

    def _iptables(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        _, iptables = tools()
        return _run(*self.prefix, iptables, "-w", "5", *args, check=check)

    def _rules(self) -> list[tuple[str, ...]]:
        return [("INPUT", "-i", self.namespace_veth, "-j", "DROP"),
                ("OUTPUT", "-o", self.namespace_veth, "-j", "DROP")]

    def partition(self) -> None:
        """Drop every packet in both directions on the namespace's end of the link (rules in
        the namespace's own filter table; the host firewall is untouched)."""
        for rule in self._rules():
            if self._iptables("-C", *rule, check=False).returncode != 0:
                self._iptables("-A", *rule)
        self._partitioned = True

    def heal(self) -> None:
        """Remove the partition (flush the namespace's filter table)."""
        self._iptables("-F")
        self._partitioned = False

    def rules(self) -> str:
        """The namespace's filter table (``iptables -S``)."""
        return self._iptables("-S").stdout

    @property
    def partitioned(self) -> bool:
        return self._partitioned

    def destroy(self) -> None:
        """Delete the namespace and the veth pair (killing what still runs inside, by pid).
        Idempotent: a namespace that is not (or no longer) ours is left alone."""
        if not self.created or self.name is None:
            return
        with _state_lock():
            _remove(self.name, self.host_veth)
            self._state_path().unlink(missing_ok=True)
        self.created = False
        self._partitioned = False

    def __enter__(self) -> Self:
        return self.create() if not self.created else self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.destroy()
