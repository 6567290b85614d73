"""One live process per instance id (`ql control --owner-id`, `ql worker --worker-id`).

A start registers the process under its id in the ``instances`` table (the store's clock
decides, see storage.ports.InstanceStore). An id held by a process that may be alive -- not
stopped, heartbeat younger than INSTANCE_STALE_MS -- is watched rather than refused at
once, so a process restarted after a crash (kill -9, OOM) does not need to be started again
by hand: a heartbeat from the holder proves it alive and the start is refused (InstanceHeld,
exit 4); silence until the registration is stale proves it gone, and the id is taken over.

While it runs, the process beats every HEARTBEAT_INTERVAL_S on a thread of its own (its
scheduler may cycle far more rarely); a beat that finds the id no longer held by this
process reports it, and the process gives the id up rather than run as a second holder.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Mapping

from qinglong.errors import InstanceHeld, QinglongError
from qinglong.storage.instances import InstanceStore, Registration

HEARTBEAT_INTERVAL_S = 5.0  # well inside INSTANCE_STALE_MS (30 s)
WATCH_INTERVAL_S = 1.0  # how often a start looks at the registration it waits for


def register(store: InstanceStore, instance_id: str, role: str, *, stop: threading.Event,
             resume: Registration | None = None,
             waiting: Callable[[InstanceHeld], None] | None = None,
             labels: Mapping[str, str | None] | None = None) -> Registration | None:
    """Register this process under ``instance_id``, watching a holder that may be alive (see
    the module's docstring). None when ``stop`` is set while it waits; InstanceHeld when the
    holder proves alive."""
    first: InstanceHeld | None = None
    while True:
        try:
            return store.instance_start(instance_id, role, socket.gethostname(), os.getpid(),
                                        resume=resume, labels=labels)
        except InstanceHeld as held:
            if first is None:
                first = held
                if waiting is not None:
                    waiting(held)
            elif (held.host, held.pid, held.seen_at_ms) != (first.host, first.pid,
                                                             first.seen_at_ms):
                raise  # it beat (or another process took the id): alive
        if stop.wait(WATCH_INTERVAL_S):
            return None


def waiting_reason(held: InstanceHeld) -> str:
    """What a start says while it watches a holder."""
    return (f"waiting for instance id {held.instance_id!r}: it is registered to pid {held.pid} "
            f"on {held.host or '?'}, last heartbeat {held.silent_ms / 1000:.1f} s ago; refused "
            f"if it beats again, taken over once it has been silent {held.stale_ms // 1000} s")


class Heartbeat:
    """Beats for one registration every ``interval_s`` until stopped. ``on_error`` hears
    storage errors (the next beat tries again); ``on_lost`` is called once, and the beats end,
    when the id is no longer held by this process."""

    def __init__(self, store: InstanceStore, instance_id: str, *,
                 on_error: Callable[[QinglongError], None], on_lost: Callable[[], None],
                 interval_s: float = HEARTBEAT_INTERVAL_S, name: str = "ql-heartbeat") -> None:
        self._store = store
        self._instance_id = instance_id
        self._on_error = on_error
        self._on_lost = on_lost
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(10.0)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                held = self._store.instance_beat(self._instance_id)
            except QinglongError as exc:
                self._on_error(exc)
                continue
            if not held:
                self._on_lost()
                return
