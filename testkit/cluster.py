"""Run `ql control` replicas as real processes and compare what they admitted with the
nominal occurrences (used by the tests and by `make demo`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from testkit import ports
from testkit.replica import SEAM_OPTIONS

REPOSITORY = Path(__file__).resolve().parent.parent  # so child processes find testkit


def free_port() -> int:
    """A free port, reserved for this process's lifetime (`testkit.ports`)."""
    return ports.free_port()


def all_threads_stopped(pid: int) -> bool:
    """Every thread of ``pid`` is in the stopped state (``T`` in /proc; ``t`` when traced).
    False once the process is gone: a frozen process is still there."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as stat:
                state = stat.read().rpartition(b")")[2].split()[0]
        except FileNotFoundError:
            continue  # a thread that has just ended
        if state not in (b"T", b"t"):
            return False
    return bool(tids)


def freeze(process: subprocess.Popen[Any], name: str, timeout: float = 10.0) -> None:
    """SIGSTOP ``process`` and return once every one of its threads has stopped.

    kill(2) returns with the stop only queued: the kernel wakes one thread to take it, and
    that thread stops the others when it next runs. On a loaded machine that can be
    milliseconds later, and meanwhile another thread goes on (a worker's job thread records
    its command's ending). A test that needs the process frozen waits on this."""
    process.send_signal(signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:  # (first: its pid may already be another's)
            raise ProcessLookupError(f"{name} exited before it stopped")
        if all_threads_stopped(process.pid):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} did not stop within {timeout} s")
        time.sleep(0.001)


class _Process:
    """What a test or the demo does with a qinglong process that serves probes on ``port``
    and prints JSON events into ``<name>.<generation>.log`` files under ``log_dir``."""

    port: int
    log_dir: Path
    process: subprocess.Popen[str] | None
    _reservation: ports.PortReservation | None

    def __post_init__(self) -> None:
        # The probe port is reserved for as long as this object lives (every generation
        # binds it again), so no other harness process is handed it between restarts.
        if not self.port:
            self._reservation = ports.reserve_port()
            self.port = self._reservation.port

    @property
    def name(self) -> str:
        raise NotImplementedError

    @property
    def log(self) -> Path:
        return self.log_dir / f"{self.name}.{self.generation}.log"

    generation: int

    def readyz(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as r:
                return int(r.status)
        except urllib.error.HTTPError as error:
            return int(error.code)
        except OSError:
            return 0

    def metric(self, name: str) -> dict[str, float]:
        """One counter or gauge from /metrics: {label text: value} (label text '' if none)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            text = r.read().decode()
        found: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith((name + "{", name + " ")):
                key, _, value = line.rpartition(" ")
                found[key[len(name):].strip("{}")] = float(value)
        return found

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.readyz() == 200:
                return
            if self.process is not None and self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"{self.name} did not become ready:\n{self.log.read_text()[-2000:]}")

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def freeze(self, timeout: float = 10.0) -> None:
        """SIGSTOP the process and return once every thread of it has stopped (``freeze``)."""
        assert self.process is not None
        freeze(self.process, self.name, timeout)

    def kill(self) -> None:
        """SIGKILL the process alone (a worker's commands live on in their own process
        groups, as they would when a host's agent dies)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self, timeout: float = 30.0) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
            raise AssertionError(f"{self.name} did not stop within {timeout} s") from None

    def events(self) -> list[dict[str, Any]]:
        return [
            json.loads(line)
            for path in sorted(self.log_dir.glob(f"{self.name}.*.log"))
            for line in path.read_text().splitlines()
            if line.startswith("{")
        ]


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPOSITORY), env.get("PYTHONPATH", "")]))
    env.update(extra)
    return env


@dataclass
class Replica(_Process):
    owner: str
    url: str
    log_dir: Path
    lease_ms: int = 5_000
    grace_ms: int = 30_000
    extra: tuple[str, ...] = ()
    prefix: tuple[str, ...] = ()  # e.g. ("faketime", "-f", "+1h")
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0  # 0: reserve one (testkit.ports)
    process: subprocess.Popen[str] | None = None
    generation: int = 0
    _reservation: ports.PortReservation | None = field(default=None, init=False, repr=False,
                                                       compare=False)
    # Start each generation after the first under a fresh owner id (``r1.2``, ``r1.3``...):
    # a killed replica's id stays registered until its heartbeat is 30 s old, and a restart
    # under the same id waits for that (README: one live process per id); chaos that wants the replica
    # back at once restarts it as a supervisor with per-start names would.
    fresh_id_per_start: bool = False

    @property
    def name(self) -> str:
        return self.owner

    @property
    def instance_id(self) -> str:
        """The --owner-id of the current generation."""
        fresh = self.fresh_id_per_start and self.generation > 1
        return f"{self.owner}.{self.generation}" if fresh else self.owner

    def command(self) -> list[str]:
        """`ql control` itself, or `testkit.replica` when a fault seam is asked for (options
        named in SEAM_OPTIONS, each followed by its value, may appear anywhere in ``extra``)."""
        seams: list[str] = []
        rest: list[str] = []
        words = iter(self.extra)
        for word in words:
            if word.split("=", 1)[0] in SEAM_OPTIONS:
                seams.append(word)
                if "=" not in word:
                    seams.append(next(words))
            else:
                rest.append(word)
        control = ["--database-url", self.url, "--owner-id", self.instance_id,
                   "--lease-ms", str(self.lease_ms), "--grace-ms", str(self.grace_ms),
                   "--http", f"127.0.0.1:{self.port}", "--json-events", *rest]
        if seams:
            return [*self.prefix, sys.executable, "-m", "testkit.replica", *seams, "--", *control]
        return [*self.prefix, sys.executable, "-m", "qinglong", "control", *control]

    def start(self) -> Replica:
        self.generation += 1
        with self.log.open("w") as out:
            self.process = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                            env=_child_env(self.env), text=True)
        return self

@dataclass
class Tally:
    expected: int
    admitted: int
    duplicates: int
    gaps: list[int]
    spurious: list[int]
    lags_ms: list[int]


class Nominal(Protocol):
    """What tally walks: a cron schedule, or the demo's interval."""

    def first_at_or_after(self, at_ms: int) -> int: ...

    def next_after(self, at_ms: int) -> int: ...


def tally(runs: list[dict[str, Any]], schedule: Nominal, start_ms: int, end_ms: int) -> Tally:
    """Compare one trigger's Runs with its nominal occurrences in [start_ms, end_ms]."""
    expected = []
    at = schedule.first_at_or_after(start_ms)
    while at <= end_ms:
        expected.append(at)
        at = schedule.next_after(at)
    counts = Counter(int(r["scheduled_for_ms"]) for r in runs)
    nominal = set(expected)
    admitted = [t for t in counts if start_ms <= t <= end_ms]
    return Tally(
        expected=len(expected),
        admitted=len(admitted),
        duplicates=sum(n - 1 for n in counts.values() if n > 1),
        gaps=[t for t in expected if t not in counts],
        spurious=[t for t in admitted if t not in nominal],
        lags_ms=[int(r["created_at_ms"]) - int(r["scheduled_for_ms"]) for r in runs
                 if start_ms <= int(r["scheduled_for_ms"]) <= end_ms],
    )


def percentile(values: list[int], p: float) -> int:
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


@dataclass
class Worker(_Process):
    """A `ql worker` process, as a test or the demo runs it (its log holds JSON events)."""

    worker_id: str
    url: str
    log_dir: Path
    slots: int = 4
    lease_ms: int = 5_000
    drain_timeout_ms: int = 5_000
    poll_ms: int = 500
    extra: tuple[str, ...] = ()
    prefix: tuple[str, ...] = ()  # e.g. ("nice", "-n", "10"): it execs, so the pid is the worker's
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0  # 0: reserve one (testkit.ports)
    process: subprocess.Popen[str] | None = None
    generation: int = 0
    _reservation: ports.PortReservation | None = field(default=None, init=False, repr=False,
                                                       compare=False)
    fresh_id_per_start: bool = False  # as Replica's: ``w1.2``, ``w1.3``... after the first

    @property
    def name(self) -> str:
        return self.worker_id

    @property
    def instance_id(self) -> str:
        """The --worker-id of the current generation."""
        fresh = self.fresh_id_per_start and self.generation > 1
        return f"{self.worker_id}.{self.generation}" if fresh else self.worker_id

    def command(self) -> list[str]:
        return [*self.prefix, sys.executable, "-m", "qinglong", "worker", "--database-url", self.url,
                "--worker-id", self.instance_id, "--slots", str(self.slots),
                "--lease-ms", str(self.lease_ms), "--drain-timeout-ms", str(self.drain_timeout_ms),
                "--poll-ms", str(self.poll_ms), "--http", f"127.0.0.1:{self.port}",
                "--log-dir", str(self.log_dir / f"{self.worker_id}.spool"), "--json-events",
                *self.extra]

    def start(self) -> Worker:
        self.generation += 1
        with self.log.open("w") as out:
            self.process = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                            env=_child_env(self.env), text=True,
                                            start_new_session=True)
        return self
