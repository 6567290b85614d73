"""The control replica's HTTP admission: /livez, /readyz, /status and /metrics.

``/livez`` is 200 while the process runs. ``/readyz`` is 200 only while the replica is
activated and admitting; it turns 503 first when the replica stops or loses the database.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from qinglong.errors import InvalidConfig


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InvalidConfig("http", "must be HOST:PORT, e.g. 127.0.0.1:8081")
    return host.strip("[]"), int(port)


def create_app(
    *,
    ready: Callable[[], tuple[bool, str]],
    status: Callable[[], dict[str, Any]],
    registry: CollectorRegistry,
) -> Starlette:
    async def livez(_: Request) -> Response:
        return JSONResponse({"status": "alive"})

    async def readyz(_: Request) -> Response:
        is_ready, reason = ready()
        if is_ready:
            return JSONResponse({"status": "ready"})
        return JSONResponse({"status": "not_ready", "reason": reason}, status_code=503)

    async def status_view(_: Request) -> Response:
        return JSONResponse(status())

    async def metrics(_: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return Starlette(routes=[
        Route("/livez", livez),
        Route("/readyz", readyz),
        Route("/status", status_view),
        Route("/metrics", metrics),
    ])


class HttpServer:
    """uvicorn on a thread, on a socket we bind ourselves (so a busy port fails here)."""

    def __init__(self, app: Starlette, listen: str) -> None:
        host, port = parse_listen(listen)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
        except OSError as exc:
            self._socket.close()
            raise InvalidConfig("http", f"cannot listen on {listen} ({exc.strerror})") from exc
        self._socket.listen(128)
        self.port = int(self._socket.getsockname()[1])
        # proxy_headers off: uvicorn would believe X-Forwarded-For from loopback (its default);
        # the API believes it only from --trusted-proxy (qinglong.web.transport)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                proxy_headers=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="ql-http", daemon=True
        )

    def start(self, timeout_s: float = 10.0) -> None:
        self._thread.start()
        ready = threading.Event()

        def wait() -> None:
            while not self._server.started and self._thread.is_alive():
                ready.wait(0.01)
            ready.set()

        threading.Thread(target=wait, daemon=True).start()
        ready.wait(timeout_s)
        if not self._server.started:
            raise InvalidConfig("http", "the HTTP server did not start")

    def stop(self, timeout_s: float = 5.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout_s)
        self._socket.close()
