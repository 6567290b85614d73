"""`python -m qinglong ARGS` as a separate process, for tests, without paying for the imports
each time (no tests here).

Starting `ql` costs about 0.5 CPU-s, nearly all of it importing qinglong, click and pydantic;
the end-to-end tests start it hundreds of times. Here a server (`tests/support/ql_zygote.py`,
one per pytest process) imports every command once and forks a fresh child per command: the
child is a separate process with its own argv, environment, working directory, standard
streams and exit code, and it shares nothing with the test but the files on disk. It runs the
same `main` that `python -m qinglong` runs.

- `run_ql` answers as ``subprocess.run([python, "-m", "qinglong", ...], capture_output=True,
  text=True)`` does;
- `start_ql` starts a long-running one (`ql serve`, `ql web`) and returns a handle with
  Popen's pid, poll, wait, send_signal, terminate, kill and returncode.

A real `python -m qinglong` is started instead when a fork could not stand for one: the
environment differs from the server's in what the interpreter reads at start-up (PYTHON*,
LD_*, FAKETIME*, the locale), an argument is bytes, or QL_TEST_FORK=0.
`tests/e2e/test_ql_process.py` compares the two.
"""

from __future__ import annotations

import atexit
import io
import itertools
import json
import locale
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # where `tests` is importable from
STARTUP_PREFIXES = ("PYTHON", "LD_", "FAKETIME", "LC_", "LANG")


def ql_command(args: Sequence[str]) -> list[str]:
    """The argv that starts `ql ARGS` for real."""
    return [sys.executable, "-m", "qinglong", *args]


def read_at_startup(env: Mapping[str, str]) -> dict[str, str]:
    """The variables the interpreter (or a preloaded library) reads as it starts."""
    return {name: value for name, value in env.items() if name.startswith(STARTUP_PREFIXES)}


class Zygote:
    """One warm server: the children it started and how each exited."""

    def __init__(self) -> None:
        self.startup = read_at_startup(os.environ)
        self.scratch = Path(tempfile.mkdtemp(prefix="ql-fork-"))
        self.numbers = itertools.count()
        self.served = 0  # children forked
        self.cpu_s = 0.0  # the CPU seconds of those that exited (QL_CPU_PROFILE counts them)
        self.changed = threading.Condition()
        self.pids: dict[int, int] = {}  # request id -> pid, until start() takes it
        self.exits: dict[int, int] = {}  # request id -> exit code, once exited and reaped
        self.broken = False
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.ql_zygote"], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        threading.Thread(target=self._listen, name="ql-fork-replies", daemon=True).start()

    def _listen(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            message = json.loads(line)
            with self.changed:
                if "exited" in message:
                    self.exits[int(message["exited"])] = int(message["returncode"])
                    self.cpu_s += float(message["cpu"])
                else:
                    self.pids[int(message["id"])] = int(message["pid"])
                self.changed.notify_all()
        with self.changed:
            self.broken = True
            self.changed.notify_all()

    def start(self, argv: Sequence[str], *, cwd: str, env: Mapping[str, str], stdin: str,
              stdout: str, stderr: str | None, session: bool) -> tuple[int, int]:
        """Fork one child; its request's id and its pid."""
        number = next(self.numbers)
        request = {"id": number, "argv": list(argv), "cwd": cwd, "env": dict(env),
                   "stdin": stdin, "stdout": stdout, "stderr": stderr, "session": session,
                   "nice": os.getpriority(os.PRIO_PROCESS, 0)}
        assert self.process.stdin is not None
        with self.changed:
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            self.process.stdin.flush()
            if not self.changed.wait_for(lambda: number in self.pids or self.broken, 60):
                raise OSError("the ql fork server did not answer")
            if number not in self.pids:
                raise OSError("the ql fork server exited")
            self.served += 1
            return number, self.pids.pop(number)

    def exit_code(self, number: int, timeout: float | None) -> int | None:
        """Child ``number``'s exit code, waiting up to ``timeout`` seconds (None: forever)."""
        with self.changed:
            self.changed.wait_for(lambda: number in self.exits or self.broken, timeout)
            return self.exits.get(number)

    def scratch_file(self, suffix: str) -> str:
        return str(self.scratch / f"{next(self.numbers)}.{suffix}")

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)
        shutil.rmtree(self.scratch, ignore_errors=True)


class ForkedQl:
    """A forked `ql` as much of ``subprocess.Popen`` as the tests use."""

    def __init__(self, zygote: Zygote, started: tuple[int, int], args: list[str]) -> None:
        self.zygote = zygote
        self.number, self.pid = started
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.exit_code(self.number, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.zygote.exit_code(self.number, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # not yet reaped, so the pid is still this child's
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_zygote: Zygote | None = None
_zygote_guard = threading.Lock()


def shared_zygote() -> Zygote | None:
    """This process's server, started on first use; None when forks are off or it broke."""
    global _zygote
    if os.environ.get("QL_TEST_FORK", "1") == "0":
        return None
    with _zygote_guard:
        if _zygote is None:
            _zygote = Zygote()
            atexit.register(_zygote.close)
        return None if _zygote.broken else _zygote


def forked_cpu_seconds() -> float:
    """The CPU seconds the commands forked for this process have taken so far."""
    return _zygote.cpu_s if _zygote is not None else 0.0


def _forkable(args: Sequence[str], env: Mapping[str, str]) -> Zygote | None:
    zygote = shared_zygote()
    if zygote is None or read_at_startup(env) != zygote.startup:
        return None
    return zygote if all(isinstance(arg, str) for arg in args) else None


def _decoded(data: bytes) -> str:
    """Bytes as subprocess's text mode gives them: the locale's encoding, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(data), encoding=locale.getpreferredencoding(False)).read()


def _where(cwd: str | Path | None) -> str:
    return str(Path(cwd).resolve()) if cwd is not None else os.getcwd()


def run_ql(args: Sequence[str], *, env: Mapping[str, str] | None = None,
           cwd: str | Path | None = None, timeout: float | None = None,
           input: str | None = None, check: bool = False) -> subprocess.CompletedProcess[str]:
    """What ``subprocess.run([python, "-m", "qinglong", *args], capture_output=True,
    text=True, ...)`` returns, from a forked child where one stands for a fresh start."""
    command = ql_command(args)
    environment = dict(os.environ if env is None else env)
    zygote = _forkable(args, environment)
    if zygote is None:
        return subprocess.run(command, env=environment, cwd=cwd, timeout=timeout, input=input,
                              capture_output=True, text=True, check=check)
    paths = [zygote.scratch_file(suffix) for suffix in ("in", "out", "err")]
    try:
        Path(paths[0]).write_text(input or "")
        child = ForkedQl(zygote, zygote.start(args, cwd=_where(cwd), env=environment,
                                              stdin=paths[0], stdout=paths[1],
                                              stderr=paths[2], session=False), command)
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(60)
            raise subprocess.TimeoutExpired(
                command, timeout or 0, _decoded(Path(paths[1]).read_bytes()),
                _decoded(Path(paths[2]).read_bytes())) from None
        assert child.returncode is not None
        done = subprocess.CompletedProcess(command, child.returncode,
                                           _decoded(Path(paths[1]).read_bytes()),
                                           _decoded(Path(paths[2]).read_bytes()))
    finally:
        for path in paths:
            Path(path).unlink(missing_ok=True)
    if check:
        done.check_returncode()
    return done


def start_ql(args: Sequence[str], *, stdout: Path | None, env: Mapping[str, str] | None = None,
             cwd: str | Path | None = None,
             session: bool = False) -> ForkedQl | subprocess.Popen[str]:
    """``python -m qinglong ARGS`` running on: its output and errors to ``stdout`` (None:
    discarded), stdin empty, in a session of its own with ``session``."""
    command = ql_command(args)
    environment = dict(os.environ if env is None else env)
    zygote = _forkable(args, environment)
    if zygote is None:
        if stdout is None:
            return subprocess.Popen(command, cwd=cwd, env=environment, text=True,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.STDOUT, start_new_session=session)
        with stdout.open("w") as out:  # the child keeps its own copy of the descriptor
            return subprocess.Popen(command, cwd=cwd, env=environment, text=True,
                                    stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=session)
    if stdout is not None:
        stdout.write_text("")  # there at once, as Popen's caller opening it makes it
    target = os.devnull if stdout is None else str(stdout)
    started = zygote.start(args, cwd=_where(cwd), env=environment, stdin=os.devnull,
                           stdout=target, stderr=None, session=session)
    return ForkedQl(zygote, started, command)

