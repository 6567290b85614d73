"""What the connection tells the API: who the client is, and whether a browser there can keep
the session cookie (docs/security.md#network-exposure).

- **Forwarded headers** (``X-Forwarded-For``, ``X-Forwarded-Proto``) are believed only from a
  peer in ``--trusted-proxy`` (addresses or networks; none by default, loopback included: a
  process on the same host could otherwise claim any address). From a trusted peer the client
  is the nearest address in ``X-Forwarded-For`` that is not itself a trusted proxy, and the
  scheme is the nearest proxy's ``X-Forwarded-Proto``; a value that is not an IP address (or
  ``http``/``https``) is not believed. uvicorn's own handling is off (it trusts loopback).
- **Login over plain HTTP.** The session cookie is ``Secure``: a browser keeps it only from an
  HTTPS page or a loopback address. A login that reached us over plain HTTP for a host that is
  not loopback is refused with 403 ``QL_INSECURE_TRANSPORT``, saying why, instead of setting a
  cookie the browser drops (which sent it back to the login page without a word).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from qinglong.errors import InsecureTransport, InvalidConfig
from qinglong.web.app import SECURITY_HEADERS
from qinglong.web.problems import problem_response

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
LOGIN_PATH = "/api/v1/session"
# what sets the Secure session cookie: the password login, and single sign-on's two routes
COOKIE_ROUTES = frozenset({("POST", LOGIN_PATH), ("GET", "/api/v1/sso/login"),
                           ("GET", "/api/v1/sso/callback")})
PLAIN_HTTP_LOGIN = (
    "this login came over plain HTTP to an address that is not loopback, so a browser would "
    "drop the session cookie (it is Secure): reach the panel over HTTPS through a reverse "
    "proxy that sends X-Forwarded-Proto (and start ql with --trusted-proxy naming it), or "
    "through a loopback address (e.g. an SSH tunnel); API tokens work over any transport")


def parse_trusted_proxies(values: Iterable[str]) -> tuple[Network, ...]:
    """``--trusted-proxy`` values: IP addresses or networks (CIDR)."""
    found: list[Network] = []
    for value in values:
        try:
            found.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise InvalidConfig("--trusted-proxy", f"{value[:80]!r} is not an IP address or "
                                                   "network (e.g. 10.0.0.5 or 10.0.0.0/24)") from None
    return tuple(found)


def _address(text: str) -> Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # [v6]:port
        text = text[1:text.index("]")]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def is_loopback_host(host: str) -> bool:
    """A Host header's host (``localhost``, ``127.0.0.1:8080``, ``[::1]:8080``) is loopback."""
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1:name.index("]")] if "]" in name else name
    elif name.count(":") == 1:
        name = name.split(":", 1)[0]
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class Transport:
    """ASGI middleware: the client and scheme as the trusted proxies say, and the plain-HTTP
    login refused."""

    def __init__(self, app: ASGIApp, trusted: tuple[Network, ...] = ()) -> None:
        self.app = app
        self.trusted = trusted

    def _trusts(self, address: Address | None) -> bool:
        return address is not None and any(address in net for net in self.trusted)

    def _forwarded(self, scope: Scope) -> None:
        client = scope.get("client")
        if not self.trusted or not client or not self._trusts(_address(str(client[0]))):
            return
        hops: list[str] = []
        proto: str | None = None
        for name, value in scope["headers"]:
            if name == b"x-forwarded-for":
                hops += value.decode("latin-1").split(",")
            elif name == b"x-forwarded-proto":
                proto = value.decode("latin-1").split(",")[-1].strip().lower()
        for hop in reversed(hops):
            address = _address(hop)
            if address is None:
                break  # not an address: believe nothing further out
            scope["client"] = (str(address), 0)
            if not self._trusts(address):
                break
        if proto in ("http", "https"):
            scope["scheme"] = proto

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            self._forwarded(scope)
        if (scope["type"] == "http"
                and (scope.get("method"), scope.get("path")) in COOKIE_ROUTES
                and scope.get("scheme") == "http"
                and not is_loopback_host(self._host(scope))):
            response = problem_response(InsecureTransport(PLAIN_HTTP_LOGIN))
            for name, value in SECURITY_HEADERS.items():
                response.headers.setdefault(name, value)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    @staticmethod
    def _host(scope: Scope) -> str:
        for name, value in scope["headers"]:
            if name == b"host":
                return str(value.decode("latin-1"))
        server: Any = scope.get("server")
        return str(server[0]) if server else ""
