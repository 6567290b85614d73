"""A Run's log followed live, as server-sent events.

The service's log stream is blocking (it polls the log between waits), so it runs on a
thread of its own and hands pieces to the event loop through a queue. The events are
``log`` (``{"text": ...}``, JSON so any output fits on one line), then ``end``
(``{"status": ...}``) when the Run has ended, or ``error`` (a problem object); a comment line
every ``HEARTBEAT_S`` keeps proxies from closing a quiet stream. When the client goes away
the stream is cancelled, the thread's next wait raises, and the thread ends; when the server
stops, the stream ends without ``end`` (the client may reconnect).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator

from qinglong.errors import InternalError, QinglongError
from qinglong.service.runs import LogPiece
from qinglong.web.problems import json_bytes, problem_body

HEARTBEAT_S = 15.0
CLOSING_POLL_S = 0.25  # how soon a stopping server ends its streams
log = logging.getLogger(__name__)


class _Stopped(Exception):
    """The client went away: stop following."""


def event(kind: str, payload: object) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + json_bytes(payload) + b"\n\n"


async def log_events(stream: Callable[[Callable[[float], None]], Iterator[LogPiece]],
                     status: Callable[[], str], *, closing: threading.Event | None = None,
                     heartbeat_s: float = HEARTBEAT_S) -> AsyncIterator[bytes]:
    """The events of one followed log; ``closing`` set (the server stops) ends the stream
    without an ``end`` event: the client may reconnect elsewhere."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, object]] = asyncio.Queue()
    stop = threading.Event()

    def put(kind: str, payload: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody listens any more
            loop.call_soon_threadsafe(queue.put_nowait, (kind, payload))

    def wait(seconds: float) -> None:
        if stop.wait(seconds) or (closing is not None and closing.is_set()):
            raise _Stopped

    def produce() -> None:
        try:
            for piece in stream(wait):
                if stop.is_set():
                    return
                if piece.text:
                    put("log", {"text": piece.text})
            put("end", {"status": status()})
        except _Stopped:
            return
        except QinglongError as exc:
            put("error", problem_body(exc))
        except Exception as exc:
            log.error("following a log failed", exc_info=exc)
            put("error", problem_body(InternalError()))

    thread = threading.Thread(target=produce, name="ql-log-follow", daemon=True)
    thread.start()
    try:
        yield b": following the log\n\n"
        quiet_s = 0.0
        while closing is None or not closing.is_set():
            try:
                kind, payload = await asyncio.wait_for(queue.get(), CLOSING_POLL_S)
            except TimeoutError:
                quiet_s += CLOSING_POLL_S
                if quiet_s >= heartbeat_s:
                    quiet_s = 0.0
                    yield b": keep-alive\n\n"
                continue
            quiet_s = 0.0
            yield event(kind, payload)
            if kind in ("end", "error"):
                return
    finally:
        stop.set()
