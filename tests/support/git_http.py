"""A private Git server on loopback for the subscription tests (no tests here): git's own
smart-HTTP backend (`git http-backend`, run as CGI per request) behind HTTP basic
authentication with one token, as a hosting service asks a deploy token to be sent."""

from __future__ import annotations

import base64
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit


@contextmanager
def private_git_server(root: Path, token: str) -> Iterator[str]:
    """Serve the bare repositories under ``root`` at ``http://127.0.0.1:PORT/NAME.git``,
    refusing (401) any request without ``Authorization: Basic x-access-token:TOKEN``."""
    expected = "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            del format, args  # quiet

        def _serve(self) -> None:
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            env = {"GIT_PROJECT_ROOT": str(root), "GIT_HTTP_EXPORT_ALL": "1",
                   "PATH_INFO": parts.path, "QUERY_STRING": parts.query,
                   "REQUEST_METHOD": self.command, "REMOTE_USER": "x-access-token",
                   "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                   "CONTENT_LENGTH": str(len(body)), "PATH": "/usr/bin:/bin"}
            done = subprocess.run(["git", "http-backend"], input=body, env=env,
                                  capture_output=True, check=False)
            head, _, payload = done.stdout.partition(b"\r\n\r\n")
            status = 200
            headers = []
            for line in head.decode("latin-1").split("\r\n"):
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.strip().split(" ", 1)[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = _serve
        do_POST = _serve

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
