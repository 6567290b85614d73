"""A PostgreSQL-aware TCP proxy that injects network faults, for tests.

Point a client (a test connection, or a ``ql control`` replica in a subprocess) at the
proxy instead of the server, then arm a fault. The proxy runs an asyncio loop on its own
daemon thread, so synchronous tests can drive it, and it listens on the loopback address
it is given only.

The faults:

- ``drop_commit``: when the server answers a COMMIT (a CommandComplete message tagged
  ``COMMIT``, as for ``COMMIT`` and ``END``; a failed transaction's COMMIT is answered
  ``ROLLBACK`` and does not count), that answer is not forwarded and both sockets are
  closed at once. The server has committed; the client sees its connection die and cannot
  tell whether the transaction committed (an "in-doubt" commit).
- ``close_after_commit``: the COMMIT answer and the ReadyForQuery after it are forwarded,
  then both sockets are closed. The client knows it committed; its next statement fails.
- ``blackhole``: nothing is forwarded in either direction, but the sockets stay open, like
  a link that silently stopped passing packets. Held bytes flow again, in order, after
  ``disarm()``. Until then the peers only notice through their own timeouts.
- ``set_delay(seconds)``: everything the server sends reaches the client ``seconds``
  later (added latency: a round trip takes at least that long; up to 1 MiB of a large
  reply is in flight at once, so big replies are not delayed once per read).
- ``sever_all()``: every proxied connection is closed now (a network reset).

``drop_commit`` and ``close_after_commit`` fire ``count`` times and then disarm
themselves; ``blackhole`` lasts until ``disarm()``. A fault may target only connections
whose ``application_name`` (sent by the client in its StartupMessage) starts with a
given prefix, so a test can hit one replica among several. ``fired`` counts what really
happened.

Encryption: the proxy must read the protocol, so it never lets TLS or GSS encryption
through. Clients should connect with ``sslmode=disable gssencmode=disable``; when a client
asks anyway (an SSLRequest or GSSENCRequest, as libpq does by default with
``sslmode=prefer``), the proxy answers ``N`` itself and the client goes on in clear text.
``sslmode=require`` and ``sslnegotiation=direct`` therefore cannot work through the proxy.

Memory is bounded by construction: each connection holds at most a few chunks of 64 KiB
in flight per direction, plus whole CommandComplete and ReadyForQuery messages (tiny; one
over 64 KiB is a protocol violation and closes the connection). Other messages, however
large, stream through without being buffered whole.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import ipaddress
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Self, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

CHUNK = 64 * 1024
QUEUE_CHUNKS = 16
MAX_HELD_MESSAGE = 64 * 1024
MAX_STARTUP = 10_000  # PostgreSQL's own limit on a startup packet
STARTUP_TIMEOUT = 10.0
CONNECT_TIMEOUT = 10.0
CALL_TIMEOUT = 5.0
STOP_TIMEOUT = 5.0

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
_HELD_TYPES = frozenset(b"CZ")  # CommandComplete, ReadyForQuery
_COMMAND_COMPLETE = ord("C")
_READY_FOR_QUERY = ord("Z")


class ProxyMode(enum.StrEnum):
    DROP_COMMIT = "drop_commit"
    CLOSE_AFTER_COMMIT = "close_after_commit"
    BLACKHOLE = "blackhole"


ENCRYPTION_REFUSED = "encryption_refused"  # a `fired` key: SSL/GSS requests answered 'N'


class ProtocolViolation(Exception):
    """The byte stream is not PostgreSQL protocol 3 as the proxy understands it."""


class BackendScanner:
    """Cuts the server-to-client byte stream at message boundaries.

    ``feed`` takes bytes as they were read and returns pieces in stream order, as
    ``(message_type, data)``: whole CommandComplete (``C``) and ReadyForQuery (``Z``)
    messages with their type byte, and ``(0, data)`` for everything else, which may end or
    start in the middle of a message. Joined, the pieces are exactly the bytes fed, except
    for a trailing incomplete header or held message, kept until more bytes come.
    """

    def __init__(self) -> None:
        self._header = bytearray()
        self._left = 0  # body bytes still to come for the current message
        self._held: bytearray | None = None

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        pieces: list[tuple[int, bytes]] = []
        run = bytearray()
        pos = 0
        while pos < len(data):
            if self._left == 0 and self._held is None:
                take = data[pos:pos + 5 - len(self._header)]
                pos += len(take)
                self._header += take
                if len(self._header) < 5:
                    break
                self._start_message(run)
            else:
                take = data[pos:pos + self._left]
                pos += len(take)
                self._left -= len(take)
                (run if self._held is None else self._held).extend(take)
            if self._left == 0 and self._held is not None:
                if run:
                    pieces.append((0, bytes(run)))
                    run.clear()
                pieces.append((self._held[0], bytes(self._held)))
                self._held = None
        if run:
            pieces.append((0, bytes(run)))
        return pieces

    def _start_message(self, run: bytearray) -> None:
        kind = self._header[0]
        length = int.from_bytes(self._header[1:5], "big")
        if length < 4:
            raise ProtocolViolation(f"message {kind!r} with length {length}")
        if kind in _HELD_TYPES:
            if length > MAX_HELD_MESSAGE:
                raise ProtocolViolation(f"message {kind!r} with length {length}")
            self._held = bytearray(self._header)
        else:
            run.extend(self._header)
        self._header.clear()
        self._left = length - 4


def command_tag(message: bytes) -> str:
    """The tag of a whole CommandComplete message (e.g. ``COMMIT``, ``INSERT 0 1``)."""
    return message[5:].rstrip(b"\0").decode("utf-8", "replace")


def startup_parameters(packet: bytes) -> dict[str, str]:
    """The parameters of a whole protocol-3 StartupMessage (length and version included)."""
    fields = packet[8:].split(b"\0")
    return {fields[i].decode("utf-8", "replace"): fields[i + 1].decode("utf-8", "replace")
            for i in range(0, len(fields) - 1, 2) if fields[i]}


@dataclass
class _Arming:
    mode: ProxyMode
    remaining: int
    prefix: str | None


@dataclass(eq=False)
class _Link:
    """One proxied client connection and its upstream connection."""

    client: asyncio.StreamWriter
    task: asyncio.Task[None] | None = None
    server: asyncio.StreamWriter | None = None
    application_name: str = ""
    close_after_ready: bool = False
    children: list[asyncio.Task[None]] = field(default_factory=list)

    def abort(self) -> None:
        """Close both sockets now, dropping whatever was not yet handed to the kernel."""
        self.client.transport.abort()
        if self.server is not None:
            self.server.transport.abort()

    def matches(self, prefix: str | None) -> bool:
        return prefix is None or self.application_name.startswith(prefix)


class PgProxy:
    """A fault-injecting proxy in front of one PostgreSQL server (see the module docs)."""

    def __init__(self, upstream_host: str, upstream_port: int,
                 listen_host: str = "127.0.0.1", listen_port: int = 0) -> None:
        if listen_host != "localhost" and not ipaddress.ip_address(listen_host).is_loopback:
            raise ValueError(f"pgproxy listens on a loopback address only, not {listen_host}")
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.listen_host = listen_host
        self.port = listen_port
        self._lifecycle = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        # Everything below is only touched on the proxy's loop (or when it is not running).
        self._links: set[_Link] = set()
        self._arming: _Arming | None = None
        self._delay = 0.0
        self._delay_prefix: str | None = None
        self._wake = asyncio.Event()
        self._fired: dict[str, int] = dict.fromkeys(
            [*(mode.value for mode in ProxyMode), ENCRYPTION_REFUSED], 0)

    # -- control, from any thread ---------------------------------------------------------

    def start(self) -> Self:
        """Bind the listener and start the proxy thread; ``port`` is then the bound port.

        After ``stop()``, ``start()`` listens on the same port again."""
        with self._lifecycle:
            if self._loop is not None:
                raise RuntimeError("PgProxy is already running")
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="pgproxy", daemon=True)
            thread.start()
            try:
                future = asyncio.run_coroutine_threadsafe(self._listen(), loop)
                future.result(CALL_TIMEOUT)
            except BaseException:
                _stop_loop(loop, thread)
                raise
            self._loop, self._thread = loop, thread
        return self

    def stop(self) -> None:
        """Close every connection and the listener, then end the thread (idempotent)."""
        with self._lifecycle:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        try:
            future.result(STOP_TIMEOUT)
        except (TimeoutError, concurrent.futures.CancelledError):
            future.cancel()
            _log.warning("pgproxy on port %s did not shut down in %ss", self.port, STOP_TIMEOUT)
        finally:
            _stop_loop(loop, thread)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def route(self, url: str, **params: str | int) -> str:
        """A ``postgresql://`` URL pointed at this proxy, with ``params`` set in its query
        (e.g. ``route(url, sslmode="disable", gssencmode="disable")``)."""
        parts = urlsplit(url)
        if parts.scheme not in ("postgresql", "postgres"):
            raise ValueError("route() takes a postgresql:// URL")
        user, at, _hosts = parts.netloc.rpartition("@")
        host = f"[{self.listen_host}]" if ":" in self.listen_host else self.listen_host
        netloc = f"{user}{at}{host}:{self.port}"
        query = {k: v for k, v in parse_qsl(parts.query) if k not in ("host", "hostaddr", "port")}
        query.update((k, str(v)) for k, v in params.items())
        return parts._replace(netloc=netloc, query=urlencode(query)).geturl()

    def arm(self, mode: ProxyMode, count: int = 1, *, application_name: str | None = None) -> None:
        """Arm ``mode`` (replacing any armed mode), on connections whose application_name
        starts with ``application_name`` when given. Commit modes fire ``count`` times;
        a blackhole lasts until ``disarm()``. In effect for every connection on return."""
        if count < 1:
            raise ValueError("count must be at least 1")
        self._call(lambda: self._set_arming(_Arming(ProxyMode(mode), count, application_name)))

    def disarm(self) -> None:
        """Disarm the armed mode; traffic held by a blackhole flows again."""
        self._call(lambda: self._set_arming(None))

    def set_delay(self, seconds: float, *, application_name: str | None = None) -> None:
        """Delay server-to-client traffic by ``seconds`` (0 turns it off)."""
        if seconds < 0:
            raise ValueError("the delay cannot be negative")

        def apply() -> None:
            self._delay, self._delay_prefix = seconds, application_name
        self._call(apply)

    def sever_all(self) -> int:
        """Close every proxied connection now; returns how many there were."""
        return self._call(self._sever_all)

    @property
    def fired(self) -> dict[str, int]:
        """How often each mode fired (a blackhole counts each time it held traffic back),
        and ``encryption_refused``: SSL/GSS requests the proxy answered ``N``."""
        return self._call(lambda: dict(self._fired))

    @property
    def connections(self) -> int:
        """Proxied connections currently open (the startup message was seen)."""
        return self._call(lambda: sum(1 for link in self._links if link.server is not None))

    def _call(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` on the proxy loop (or right here when the proxy is not running)."""
        loop = self._loop
        if loop is None:
            return fn()

        async def run() -> _T:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), loop).result(CALL_TIMEOUT)

    # -- on the proxy loop ---------------------------------------------------------------

    def _set_arming(self, arming: _Arming | None) -> None:
        self._arming = arming
        self._wake.set()  # held traffic re-checks whether it may flow
        self._wake = asyncio.Event()

    def _sever_all(self) -> int:
        links = [link for link in self._links if link.server is not None]
        for link in list(self._links):
            link.abort()
            if link.task is not None:
                link.task.cancel()
        return len(links)

    def _take_commit_fault(self, link: _Link) -> ProxyMode | None:
        arming = self._arming
        if arming is None or arming.mode is ProxyMode.BLACKHOLE or not link.matches(arming.prefix):
            return None
        arming.remaining -= 1
        if arming.remaining == 0:
            self._set_arming(None)
        return arming.mode

    def _delay_for(self, link: _Link) -> float:
        return self._delay if link.matches(self._delay_prefix) else 0.0

    def _blackholed(self, link: _Link) -> bool:
        arming = self._arming
        return arming is not None and arming.mode is ProxyMode.BLACKHOLE \
            and link.matches(arming.prefix)

    async def _flowing(self, link: _Link) -> None:
        """Return when no blackhole holds this connection's traffic."""
        counted = False
        while self._blackholed(link):
            if not counted:
                self._fired[ProxyMode.BLACKHOLE.value] += 1
                counted = True
            await self._wake.wait()

    async def _listen(self) -> None:
        self._links.clear()
        self._wake = asyncio.Event()
        self._server = await asyncio.start_server(self._serve, self.listen_host, self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        self._sever_all()
        tasks = [link.task for link in self._links if link.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_TIMEOUT / 2)

    async def _serve(self, client_reader: asyncio.StreamReader,
                     client_writer: asyncio.StreamWriter) -> None:
        link = _Link(client=client_writer, task=asyncio.current_task())
        self._links.add(link)
        try:
            await self._proxy(link, client_reader)
        except (OSError, EOFError, TimeoutError, ProtocolViolation) as exc:
            _log.debug("pgproxy connection ended: %r", exc)
        except asyncio.CancelledError:
            # Only sever_all() and stop() cancel this task. Ending it normally matters:
            # asyncio (3.11) logs an error for a cancelled client_connected_cb task.
            pass
        except Exception:
            _log.warning("pgproxy connection failed", exc_info=True)
        finally:
            link.abort()
            for child in link.children:
                child.cancel()
            self._links.discard(link)
            for result in await asyncio.gather(*link.children, return_exceptions=True):
                if isinstance(result, Exception) and not isinstance(
                        result, OSError | EOFError | ProtocolViolation):
                    _log.warning("pgproxy connection failed", exc_info=result)

    async def _proxy(self, link: _Link, client_reader: asyncio.StreamReader) -> None:
        _unbuffered(link.client)
        startup = await asyncio.wait_for(self._read_startup(link, client_reader), STARTUP_TIMEOUT)
        server_reader, server_writer = await asyncio.wait_for(
            asyncio.open_connection(self.upstream_host, self.upstream_port), CONNECT_TIMEOUT)
        link.server = server_writer
        _unbuffered(server_writer)
        server_writer.write(startup)
        await server_writer.drain()
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue(QUEUE_CHUNKS)
        to_server = asyncio.create_task(self._to_server(link, client_reader, server_writer))
        to_client = asyncio.create_task(self._to_client(link, queue, link.client))
        link.children = [to_server, to_client,
                         asyncio.create_task(self._from_server(link, server_reader, queue))]
        await asyncio.wait([to_server, to_client], return_when=asyncio.FIRST_COMPLETED)

    async def _read_startup(self, link: _Link, reader: asyncio.StreamReader) -> bytes:
        """Read the StartupMessage (or a CancelRequest), refusing encryption on the way."""
        while True:
            head = await reader.readexactly(4)
            length = int.from_bytes(head, "big")
            if not 8 <= length <= MAX_STARTUP:
                raise ProtocolViolation(f"startup packet of length {length}")
            packet = head + await reader.readexactly(length - 4)
            code = int.from_bytes(packet[4:8], "big")
            if length == 8 and code in (SSL_REQUEST, GSSENC_REQUEST):
                self._fired[ENCRYPTION_REFUSED] += 1
                link.client.write(b"N")
                await link.client.drain()
                continue
            if code >> 16 == 3:
                link.application_name = startup_parameters(packet).get("application_name", "")
            return packet

    async def _to_server(self, link: _Link, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(CHUNK):
            await self._flowing(link)
            writer.write(data)
            await writer.drain()

    async def _from_server(self, link: _Link, reader: asyncio.StreamReader,
                           queue: asyncio.Queue[tuple[float, bytes] | None]) -> None:
        loop = asyncio.get_running_loop()
        try:
            while data := await reader.read(CHUNK):
                await queue.put((loop.time() + self._delay_for(link), data))
        except OSError as exc:
            _log.debug("pgproxy upstream read failed: %r", exc)
        await queue.put(None)  # not on cancellation: nobody may be reading the queue then

    async def _to_client(self, link: _Link, queue: asyncio.Queue[tuple[float, bytes] | None],
                         writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        scanner = BackendScanner()
        while (item := await queue.get()) is not None:
            due, data = item
            if due > loop.time():
                await asyncio.sleep(due - loop.time())
            await self._flowing(link)
            if not await self._forward(link, scanner.feed(data), writer):
                return
            await writer.drain()

    async def _forward(self, link: _Link, pieces: list[tuple[int, bytes]],
                       writer: asyncio.StreamWriter) -> bool:
        """Write server pieces to the client, applying commit faults; False once closed."""
        for kind, data in pieces:
            if kind == _COMMAND_COMPLETE and command_tag(data) == "COMMIT":
                mode = self._take_commit_fault(link)
                if mode is ProxyMode.DROP_COMMIT:
                    self._fired[mode.value] += 1
                    link.abort()
                    return False
                if mode is ProxyMode.CLOSE_AFTER_COMMIT:
                    link.close_after_ready = True
            writer.write(data)
            if kind == _READY_FOR_QUERY and link.close_after_ready:
                await writer.drain()
                self._fired[ProxyMode.CLOSE_AFTER_COMMIT.value] += 1
                link.abort()
                return False
        return True


def _unbuffered(writer: asyncio.StreamWriter) -> None:
    """Make ``drain()`` wait until every written byte is in the kernel, so closing the
    socket right after it loses nothing that was forwarded."""
    writer.transport.set_write_buffer_limits(high=0)


def _stop_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    loop.call_soon_threadsafe(loop.stop)
    thread.join(STOP_TIMEOUT)
    if not thread.is_alive():
        loop.close()
