"""`python -m qinglong ARGS` as a separate process, for tests, without paying for the imports
each time (no tests here).

Starting `ql` costs about 0.5 CPU-s, nearly all of it importing qinglong, click and pydantic;
the end-to-end tests start it hundreds of times. `run_ql` hands the command to a server
(`tests/support/ql_zygote.py`, one per pytest process) that has imported every command once
and forks a fresh child per command: the child is a separate process with its own argv,
environment, working directory and standard streams, its exit code is the command's, and it
shares nothing with the test but the files on disk. It runs the same `main` that
`python -m qinglong` runs.

A real `python -m qinglong` is started instead when a fork could not stand for one: the
environment differs from the server's in what the interpreter reads at start-up (PYTHON*,
LD_*, FAKETIME*, the locale), the server is busy with another thread's command (commands a
test runs at once stay concurrent), or QL_TEST_FORK=0. `tests/e2e/test_packaging.py` and
`test_ql_process.py` start real ones on purpose.
"""

from __future__ import annotations

import atexit
import io
import itertools
import json
import locale
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # where `tests` is importable from
STARTUP_PREFIXES = ("PYTHON", "LD_", "FAKETIME", "LC_", "LANG")
NO_TIMEOUT_S = 3600.0


def read_at_startup(env: Mapping[str, str]) -> dict[str, str]:
    """The variables the interpreter (or a preloaded library) reads as it starts."""
    return {name: value for name, value in env.items() if name.startswith(STARTUP_PREFIXES)}


class Zygote:
    """One warm server and the lock that gives it to one command at a time."""

    def __init__(self) -> None:
        self.startup = read_at_startup(os.environ)
        self.lock = threading.Lock()
        self.scratch = Path(tempfile.mkdtemp(prefix="ql-fork-"))
        self.numbers = itertools.count()
        self.served = 0  # commands answered by a fork
        self.cpu_s = 0.0  # the CPU seconds those forks took (QL_CPU_PROFILE counts them)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.ql_zygote"], cwd=ROOT, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=1)

    def ask(self, argv: Sequence[str], cwd: str, env: Mapping[str, str], stdin: bytes,
            timeout: float) -> tuple[int | None, bytes, bytes]:
        """(the exit code or None on a timeout, stdout, stderr) of one forked command."""
        base = self.scratch / str(next(self.numbers))
        paths = {key: f"{base}.{key}" for key in ("stdin", "stdout", "stderr")}
        Path(paths["stdin"]).write_bytes(stdin)
        try:
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.write(json.dumps({
                "argv": list(argv), "cwd": cwd, "env": dict(env), "timeout": timeout,
                **paths}) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
            if not line:
                raise OSError("the ql fork server exited")
            answer = json.loads(line)
            self.served += 1
            self.cpu_s += float(answer.get("cpu", 0.0))
            out = Path(paths["stdout"]).read_bytes()
            err = Path(paths["stderr"]).read_bytes()
            return (None if answer.get("timeout") else int(answer["returncode"])), out, err
        finally:
            for path in paths.values():
                Path(path).unlink(missing_ok=True)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)
        shutil.rmtree(self.scratch, ignore_errors=True)


_zygote: Zygote | None = None
_zygote_broken = False
_zygote_guard = threading.Lock()


def shared_zygote() -> Zygote | None:
    """This process's server, started on first use; None when forks are off or it failed."""
    global _zygote
    if os.environ.get("QL_TEST_FORK", "1") == "0" or _zygote_broken:
        return None
    with _zygote_guard:
        if _zygote is None:
            _zygote = Zygote()
            atexit.register(_zygote.close)
        return _zygote


def forked_cpu_seconds() -> float:
    """The CPU seconds the commands forked for this process have taken so far."""
    return _zygote.cpu_s if _zygote is not None else 0.0


def _decoded(data: bytes) -> str:
    """Bytes as subprocess's text mode gives them: the locale's encoding, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(data), encoding=locale.getpreferredencoding(False)).read()


def run_ql(args: Sequence[str], *, env: Mapping[str, str] | None = None,
           cwd: str | Path | None = None, timeout: float | None = None,
           input: str | None = None, check: bool = False) -> subprocess.CompletedProcess[str]:
    """What ``subprocess.run([python, "-m", "qinglong", *args], capture_output=True,
    text=True, ...)`` returns, from a forked child where one stands for a fresh start."""
    global _zygote_broken
    command = [sys.executable, "-m", "qinglong", *args]
    environment = dict(os.environ if env is None else env)
    zygote = shared_zygote()
    forkable = (zygote is not None and read_at_startup(environment) == zygote.startup
                and all(isinstance(arg, str) for arg in args))
    if zygote is None or not forkable or not zygote.lock.acquire(blocking=False):
        return subprocess.run(command, env=environment, cwd=cwd, timeout=timeout, input=input,
                              capture_output=True, text=True, check=check)
    try:
        code, out, err = zygote.ask(
            args, str(Path(cwd).resolve()) if cwd is not None else os.getcwd(), environment,
            (input or "").encode(), NO_TIMEOUT_S if timeout is None else timeout)
    except OSError:
        _zygote_broken = True
        return subprocess.run(command, env=environment, cwd=cwd, timeout=timeout, input=input,
                              capture_output=True, text=True, check=check)
    finally:
        zygote.lock.release()
    if code is None:
        raise subprocess.TimeoutExpired(command, timeout or NO_TIMEOUT_S, _decoded(out),
                                        _decoded(err))
    done = subprocess.CompletedProcess(command, code, _decoded(out), _decoded(err))
    if check:
        done.check_returncode()
    return done
