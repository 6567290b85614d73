"""Loaded at start-up by every Python process that has this folder on PYTHONPATH: the servers
the fuzz run starts (tests/support/fuzz_support.py) and the Python children they spawn. A
fuzzed request can name any host (a webhook URL, an SMTP server, a Git remote), and a server
that reaches out would send traffic off this machine: here no name is looked up and no socket
connects or sends anywhere but the loopback interface (or a Unix socket). The API itself is
unchanged; only its way out is closed.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from typing import Any

_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex
_sendto = socket.socket.sendto
_getaddrinfo = socket.getaddrinfo
_NETWORK = (socket.AF_INET, socket.AF_INET6)
REFUSED = "refused by the fuzz run's loopback guard (tests/support/loopback_only)"


def _loopback_host(host: object) -> bool:
    if host is None:
        return True
    text = host.decode() if isinstance(host, bytes) else str(host)
    if text.lower() in ("localhost", "localhost.", ""):
        return True
    try:
        return ipaddress.ip_address(text.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _refuse(sock: socket.socket, address: Any) -> None:
    if sock.family in _NETWORK and not _loopback_host(address[0]):
        raise OSError(errno.ENETUNREACH, f"{address[0]}: {REFUSED}")


def connect(self: socket.socket, address: Any) -> None:
    _refuse(self, address)
    _connect(self, address)


def connect_ex(self: socket.socket, address: Any) -> int:
    if self.family in _NETWORK and not _loopback_host(address[0]):
        return errno.ENETUNREACH
    return _connect_ex(self, address)


def sendto(self: socket.socket, data: Any, *args: Any) -> int:
    _refuse(self, args[-1])
    return _sendto(self, data, *args)


def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if not _loopback_host(host):
        raise socket.gaierror(socket.EAI_NONAME, f"{host!r}: {REFUSED}")
    return _getaddrinfo(host, *args, **kwargs)


socket.socket.connect = connect  # type: ignore[method-assign]
socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
socket.socket.sendto = sendto  # type: ignore[method-assign]
socket.getaddrinfo = getaddrinfo
