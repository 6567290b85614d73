"""Serving the HTTP API: the bind rule (loopback unless asked otherwise), the server on a
thread, and the heartbeat that lists a `ql web` among the processes serving the database."""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from qinglong.api.health import HttpServer, parse_listen
from qinglong.clock import Clock
from qinglong.diagnostics import Diagnostic
from qinglong.errors import InvalidConfig, QinglongError
from qinglong.service.accounts import SessionPolicy
from qinglong.storage.kernel import Wake
from qinglong.web.app import create_web_app
from qinglong.web.backend import WEB_POOL_SIZE, WebBackend, open_web_backend
from qinglong.web.transport import Network, Transport

HEARTBEAT_S = 5.0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(listen: str, allow_remote: bool, flag: str = "--allow-remote") -> tuple[str, int]:
    """HOST:PORT; a host other than loopback only with ``allow_remote`` (the API then answers
    the network: put TLS in front of it, the session cookie is Secure, and a browser login over
    plain HTTP to an address that is not loopback is refused, saying so)."""
    host, port = parse_listen(listen)
    if not is_loopback(host) and not allow_remote:
        raise InvalidConfig("--http", f"{host} is not a loopback address: the API binds to "
                                    f"loopback unless {flag} is given (and then belongs behind "
                                    "TLS)")
    return host, port


def instance_name(given: str | None) -> str:
    if given is not None:
        return given
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:80] or "host"
    return f"web:{host}:{os.getpid()}"


@dataclass(slots=True)
class RunningApi:
    """The API answering on ``port`` until ``stop``."""

    server: HttpServer
    backend: WebBackend
    port: int
    close_backend: bool
    _beat: threading.Thread | None = None
    _stopping: threading.Event | None = None
    instance_id: str | None = None

    def stop(self) -> None:
        self.backend.closing.set()  # live log streams end, so the server need not wait
        if self._stopping is not None:
            self._stopping.set()
        self.server.stop()
        if self._beat is not None:
            self._beat.join(5.0)
        if self.instance_id is not None:
            try:
                self.backend.processes.stopped(self.instance_id)
            except QinglongError:
                pass  # the database is away: it will see the heartbeat stop
        if self.close_backend:
            self.backend.close()


def serve_api(backend: WebBackend, clock: Clock, listen: str, *, close_backend: bool = False,
              instance_id: str | None = None,
              diagnostics: Callable[[Diagnostic], None] | None = None,
              trusted_proxies: tuple[Network, ...] = ()) -> RunningApi:
    """Start the API over ``backend`` on ``listen`` (already checked by ``check_bind``);
    with ``instance_id``, register it and keep a heartbeat. Forwarded headers are believed
    from ``trusted_proxies`` only (none by default)."""
    app = create_web_app(backend, clock)
    app.add_middleware(Transport, trusted=trusted_proxies)
    server = HttpServer(app, listen)
    server.start()
    running = RunningApi(server=server, backend=backend, port=server.port,
                         close_backend=close_backend)
    if instance_id is not None:
        try:
            backend.processes.register(instance_id, "web", socket.gethostname(), os.getpid())
        except BaseException:
            running.stop()
            raise
        stopping = threading.Event()

        def beat() -> None:
            while not stopping.wait(HEARTBEAT_S):
                try:
                    backend.processes.beat(instance_id)
                except QinglongError as exc:
                    if diagnostics is not None:
                        diagnostics(Diagnostic(source="web", code=exc.code, message=exc.message))

        running.instance_id = instance_id
        running._stopping = stopping
        running._beat = threading.Thread(target=beat, name="ql-web-heartbeat", daemon=True)
        running._beat.start()
    return running


def open_and_serve(database_url: str, clock: Clock, listen: str, *,
                   pool_size: int = WEB_POOL_SIZE, session_policy: SessionPolicy | None = None,
                   instance_id: str | None = None,
                   diagnostics: Callable[[Diagnostic], None] | None = None,
                   trusted_proxies: tuple[Network, ...] = (),
                   on_commit: Callable[[Sequence[Wake]], None] | None = None) -> RunningApi:
    """``on_commit`` hears what the API's commits change (`ql serve --http`: its own loops
    wake at once for a Run admitted or a trigger published over the API)."""
    backend = open_web_backend(database_url, clock, pool_size=pool_size,
                               session_policy=session_policy, on_commit=on_commit)
    try:
        return serve_api(backend, clock, listen, close_backend=True, instance_id=instance_id,
                         diagnostics=diagnostics, trusted_proxies=trusted_proxies)
    except BaseException:
        backend.close()
        raise
