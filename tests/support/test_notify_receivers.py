"""Receivers the notification tests send to: a webhook server that checks signatures, and a
tiny SMTP server (both in-process, on 127.0.0.1). Helpers only: no tests here.

The webhook receiver can be switched between answering 200, answering an error status, and
not listening at all (connections refused), on the same port, as a receiver that goes down
and comes back would; it keeps every request it got, so a test can dedupe by idempotency id
the way a real receiver would.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socketserver
import threading
import time
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from qinglong.domain.notify import signing


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    answered: int
    verified: bool | None  # None: the receiver has no secret to check with

    @property
    def document(self) -> dict[str, Any]:
        value = json.loads(self.body)
        assert isinstance(value, dict)
        return value


def independent_signature_ok(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """The check exactly as docs/controls/notifications.md tells a receiver to write it (no
    qinglong code): HMAC-SHA256 over "<timestamp>.<body>", hex, after "v1="."""
    timestamp = headers.get("X-Qinglong-Timestamp", "")
    given = headers.get("X-Qinglong-Signature", "")
    expected = hmac.new(secret.encode(), timestamp.encode() + b"." + body,
                        hashlib.sha256).hexdigest()
    fresh = timestamp.isdigit() and abs(time.time() - int(timestamp)) <= 300
    return fresh and hmac.compare_digest(given, "v1=" + expected)


class WebhookReceiver:
    """An HTTP receiver on a fixed port; ``mode`` is "ok", "error" or "down"."""

    def __init__(self, secret: str | None = None, *, verify_now: Any = None,
                 error_status: int = 503) -> None:
        self.secret = secret
        self.error_status = error_status
        self._verify_now = verify_now or (lambda: int(time.time()))
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.mode = "ok"
        probe = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
        self.port = probe.server_address[1]
        probe.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                headers = {k: v for k, v in self.headers.items()}
                verified = None
                if receiver.secret is not None:
                    verified = signing.verify(
                        receiver.secret, timestamp=headers.get(signing.TIMESTAMP_HEADER, ""),
                        signature_header=headers.get(signing.SIGNATURE_HEADER, ""), body=body,
                        now_s=receiver._verify_now())
                status = receiver.error_status if receiver.mode == "error" else (
                    200 if verified is not False else 401)
                with receiver._lock:
                    receiver.requests.append(Received(path=self.path, headers=headers,
                                                      body=body, answered=status,
                                                      verified=verified))
                reply = b"ok" if status == 200 else b"receiver says no"
                self.send_response(status)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            do_POST = _answer  # http.server names its handlers so
            do_PUT = _answer
            do_GET = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def start(self) -> WebhookReceiver:
        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening: connections are refused until ``start`` again."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def received(self) -> list[Received]:
        with self._lock:
            return list(self.requests)

    def accepted(self) -> list[Received]:
        return [r for r in self.received() if r.answered == 200]

    def accepted_ids(self) -> dict[str, int]:
        """How many times each idempotency id was accepted (a receiver dedupes by it)."""
        counts: dict[str, int] = {}
        for item in self.accepted():
            key = item.headers[signing.DELIVERY_HEADER]
            counts[key] = counts.get(key, 0) + 1
        return counts


# --- SMTP ---------------------------------------------------------------------------------


@dataclass
class Mail:
    sender: str
    recipients: list[str]
    data: bytes

    @property
    def message(self) -> Message:
        return message_from_bytes(self.data)


@dataclass
class SmtpReceiver:
    """A minimal SMTP server (EHLO, AUTH PLAIN, MAIL, RCPT, DATA, RSET, NOOP, QUIT)."""

    user: str | None = None
    password: str | None = None
    refuse: set[str] = field(default_factory=set)  # recipients answered 550
    mails: list[Mail] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)
    port: int = 0
    _server: socketserver.ThreadingTCPServer | None = None

    def start(self) -> SmtpReceiver:
        receiver = self

        class Session(socketserver.StreamRequestHandler):
            def reply(self, line: str) -> None:
                self.wfile.write(line.encode() + b"\r\n")

            def handle(self) -> None:
                self.reply("220 localhost test ESMTP")
                sender, recipients, authed = "", [], receiver.user is None
                while True:
                    raw = self.rfile.readline()
                    if not raw:
                        return
                    line = raw.decode(errors="replace").rstrip("\r\n")
                    verb = line.split(" ", 1)[0].upper()
                    if verb in ("EHLO", "HELO"):
                        lines = ["localhost", "8BITMIME"]
                        lines += ["AUTH PLAIN"] if receiver.user is not None else []
                        for extra in lines[:-1]:
                            self.reply(f"250-{extra}")
                        self.reply(f"250 {lines[-1]}")
                    elif verb == "AUTH":
                        parts = line.split()
                        decoded = base64.b64decode(parts[2]).split(b"\0") if len(parts) > 2 else []
                        user, password = (decoded[1].decode(), decoded[2].decode()) \
                            if len(decoded) == 3 else ("", "")
                        receiver.logins.append((user, password))
                        authed = (user, password) == (receiver.user, receiver.password)
                        self.reply("235 ok" if authed else "535 authentication failed")
                    elif verb == "MAIL":
                        if not authed:
                            self.reply("530 authentication required")
                            continue
                        sender, recipients = line.split(":", 1)[1].strip(" <>"), []
                        self.reply("250 ok")
                    elif verb == "RCPT":
                        address = line.split(":", 1)[1].strip(" <>")
                        if address in receiver.refuse:
                            self.reply("550 no such mailbox")
                        else:
                            recipients.append(address)
                            self.reply("250 ok")
                    elif verb == "DATA":
                        self.reply("354 go ahead")
                        data = b""
                        while True:
                            chunk = self.rfile.readline()
                            if chunk in (b".\r\n", b""):
                                break
                            data += chunk[1:] if chunk.startswith(b"..") else chunk
                        receiver.mails.append(Mail(sender, recipients, data))
                        self.reply(f"250 queued as {len(receiver.mails)}")
                    elif verb in ("RSET", "NOOP"):
                        self.reply("250 ok")
                    elif verb == "QUIT":
                        self.reply("221 bye")
                        return
                    else:
                        self.reply("502 not implemented")

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", self.port), Session)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
