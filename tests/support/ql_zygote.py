"""The server half of `tests/support/ql_process.py` (no tests here): a Python process that has
imported every `ql` command once and forks a fresh child for each command it is asked to run.

It reads one JSON request per line on stdin and answers one JSON line on stdout:

    {"argv": [...], "cwd": "...", "env": {...}, "stdin": path, "stdout": path,
     "stderr": path, "timeout": seconds}  ->  {"returncode": N, "cpu": seconds}
                                             or {"timeout": true, "cpu": seconds}

The child takes the request's working directory, environment (the time zone re-read) and
standard streams, runs `qinglong.cli.main.main(argv)` as `python -m qinglong` would, runs the
exit handlers and exits with its code. The server holds no thread, connection or open file
but its pipes when it forks, so a child starts as a clean process with the modules loaded.
It exits when stdin closes (its pytest worker is gone).
"""

from __future__ import annotations

import atexit
import importlib
import io
import json
import os
import signal
import sys
import time
import traceback
from typing import Any

POLL_S = 0.002  # how often the server looks whether the child has exited


def preload() -> None:
    """Import what any `ql` command may import, so that no child pays for it."""
    from qinglong.cli import main as cli_main

    for module, _attribute, extensions in cli_main.COMMANDS.values():
        for name in (module, *extensions):
            importlib.import_module(f"qinglong.cli.commands.{name}")
    for name in ("psycopg", "psycopg_pool", "sqlite3", "qinglong.storage.postgres",
                 "qinglong.storage.sqlite"):
        try:
            importlib.import_module(name)
        except ImportError:  # a module a command imports only where it exists
            pass


def reopened(fd: int, mode: str, errors: str) -> io.TextIOWrapper:
    """A text stream on descriptor fd as Python sets one up at start-up for a pipe or file."""
    raw = io.FileIO(fd, mode, closefd=False)
    buffered: io.BufferedIOBase
    buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding="utf-8", errors=errors,
                            line_buffering=False, write_through=False)


def child(request: dict[str, Any], replies: int) -> None:
    """In the forked child: become the command the request names, never return."""
    code = 1
    try:
        os.close(replies)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for fd, key, flags in ((0, "stdin", os.O_RDONLY),
                               (1, "stdout", os.O_WRONLY | os.O_TRUNC | os.O_CREAT),
                               (2, "stderr", os.O_WRONLY | os.O_TRUNC | os.O_CREAT)):
            opened = os.open(request[key], flags, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = reopened(0, "r", "surrogateescape")
        sys.stdout = reopened(1, "w", "surrogateescape")
        sys.stderr = reopened(2, "w", "backslashreplace")
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()
        sys.argv = ["ql", *request["argv"]]  # main() names itself ql (prog_name)
        from qinglong.cli.main import main

        try:
            main(list(request["argv"]))
            code = 0
        except SystemExit as done:
            if done.code is None:
                code = 0
            elif isinstance(done.code, int):
                code = done.code
            else:
                print(done.code, file=sys.stderr)
                code = 1
        except BaseException:  # what the interpreter would print for an uncaught error
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:
            pass
    finally:
        os._exit(code & 0xFF)


def wait(pid: int, timeout: float) -> dict[str, Any]:
    """The child's exit status, or a timeout (after which the child is killed and reaped)."""
    deadline = time.monotonic() + timeout
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done == pid:
            return {"returncode": os.waitstatus_to_exitcode(status),
                    "cpu": usage.ru_utime + usage.ru_stime}
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
            _, _, usage = os.wait4(pid, 0)
            return {"timeout": True, "cpu": usage.ru_utime + usage.ru_stime}
        time.sleep(POLL_S)


def serve() -> None:
    preload()
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            child(request, replies.fileno())
        replies.write(json.dumps(wait(pid, float(request["timeout"]))) + "\n")


if __name__ == "__main__":
    serve()
