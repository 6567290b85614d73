"""The server half of `tests/support/ql_process.py` (no tests here): a Python process that has
imported every `ql` command once and forks a fresh child for each command it is asked to start.

It reads one JSON request per line on stdin and writes JSON lines on stdout:

    {"id": N, "argv": [...], "cwd": "...", "env": {...}, "stdin": path, "stdout": path,
     "stderr": path or null (null: where stdout goes), "session": bool, "nice": N}
        -> {"id": N, "pid": PID}                       at once
        -> {"exited": N, "returncode": N, "cpu": s}    when that child has exited

The child takes the request's working directory, environment (the time zone re-read),
standard streams, priority and (with "session") a session of its own, runs
`qinglong.cli.main.main(argv)` as `python -m qinglong` would, runs the exit handlers and exits
with its code. The server holds no thread or connection when it forks, so a child starts as a
clean process with the modules already loaded. It exits when stdin closes (its pytest process
is gone).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import json
import os
import select
import signal
import sys
import time
import traceback
from typing import Any


def preload() -> None:
    """Import what any `ql` command may import, so that no child pays for it."""
    from qinglong.cli import main as cli_main

    for module, _attribute, extensions in cli_main.COMMANDS.values():
        for name in (module, *extensions):
            importlib.import_module(f"qinglong.cli.commands.{name}")
    for name in ("psycopg", "psycopg_pool", "sqlite3", "qinglong.storage.postgres",
                 "qinglong.storage.sqlite"):
        with contextlib.suppress(ImportError):  # a module a command imports where it exists
            importlib.import_module(name)


def reopened(fd: int, mode: str, errors: str) -> io.TextIOWrapper:
    """A text stream on descriptor fd as Python sets one up at start-up for a pipe or file."""
    raw = io.FileIO(fd, mode, closefd=False)
    buffered: io.BufferedIOBase
    buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding="utf-8", errors=errors,
                            line_buffering=False, write_through=False)


def child(request: dict[str, Any], inherited: tuple[int, ...]) -> None:
    """In the forked child: become the command the request names; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for fd in inherited:
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if request.get("session"):
            os.setsid()
        with contextlib.suppress(PermissionError):  # only root may raise it back
            os.setpriority(os.PRIO_PROCESS, 0, int(request.get("nice", 0)))
        written = os.O_WRONLY | os.O_TRUNC | os.O_CREAT
        streams = ((0, request["stdin"], os.O_RDONLY), (1, request["stdout"], written),
                   (2, request["stderr"], written))
        for fd, path, flags in streams:
            if path is None:  # stderr where stdout goes
                os.dup2(1, fd)
                continue
            opened = os.open(path, flags, 0o600)
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
        with contextlib.suppress(BaseException):
            traceback.print_exc()
            sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)


def reap(replies: io.TextIOWrapper, children: dict[int, int]) -> None:
    """Report every child that has exited, by its request's id (a pid is reused in time)."""
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        number = children.pop(pid, None)
        if number is None:  # not a command's (nothing else is started here, but never die)
            continue
        replies.write(json.dumps({"exited": number,
                                  "returncode": os.waitstatus_to_exitcode(status),
                                  "cpu": usage.ru_utime + usage.ru_stime}) + "\n")


def serve() -> None:
    preload()
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    woken, wake = os.pipe()  # SIGCHLD writes a byte here, so select wakes for it
    os.set_blocking(wake, False)
    os.set_blocking(woken, False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(wake)
    pending = b""
    children: dict[int, int] = {}  # pid -> request id, while the child has not been reaped
    while True:
        try:
            ready, _, _ = select.select([0, woken], [], [])
        except InterruptedError:
            continue
        if woken in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(woken, 4096)
        if 0 in ready:
            data = os.read(0, 65536)
            if not data:
                return
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    child(request, (replies.fileno(), woken, wake))
                children[pid] = request["id"]
                replies.write(json.dumps({"id": request["id"], "pid": pid}) + "\n")
        reap(replies, children)


if __name__ == "__main__":
    serve()
