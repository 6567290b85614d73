"""A small, real OpenID Connect provider for the single sign-on tests: an HTTP server on a
free loopback port with discovery, a JWKS holding an RSA key generated at start, an
authorization endpoint that approves the configured user at once and redirects back with a
code, and a token endpoint that checks the client (HTTP Basic), the code (once), the redirect
URI and the PKCE verifier (S256) before it answers with a signed ID token.

``Issuer.tamper`` changes what the next ID tokens say (claims to override, signing with a
key the JWKS does not hold, a kid of its own) so a test can see each check of the relying
party refuse; ``Issuer.rotate()`` replaces the signing key (the JWKS follows).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

CLIENT_ID = "qinglong-test"
CLIENT_SECRET = "s3cret-of-the-client"


def _key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})


@dataclass
class Grant:
    client_id: str
    redirect_uri: str
    challenge: str
    nonce: str
    claims: dict[str, Any]


@dataclass
class Tamper:
    claims: dict[str, Any] = field(default_factory=dict)  # merged over the ID token's
    drop: tuple[str, ...] = ()  # claims left out
    foreign_key: bool = False  # sign with a key the JWKS does not publish (same kid)
    kid: str | None = None  # announce this kid instead of the key's


class Issuer:
    def __init__(self) -> None:
        self.key = _key("k1")
        self.user: dict[str, Any] = {"sub": "sub-ann", "preferred_username": "ann",
                                     "email": "ann@example.test", "email_verified": True}
        self.tamper = Tamper()
        self.document: dict[str, Any] = {}  # merged over the discovery document
        self.broken: set[str] = set()  # paths that answer 500
        self.grants: dict[str, Grant] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request
        self.token_refusals: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> Issuer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def rotate(self) -> None:
        self.key = _key(f"k{secrets.token_hex(4)}")

    # -- what it serves -----------------------------------------------------------------------

    def discovery(self) -> dict[str, Any]:
        return {"issuer": self.url, "authorization_endpoint": self.url + "/authorize",
                "token_endpoint": self.url + "/token", "jwks_uri": self.url + "/jwks",
                "response_types_supported": ["code"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic"],
                **self.document}

    def jwks(self) -> dict[str, Any]:
        return KeySet([self.key]).as_dict(private=False)

    def authorize(self, query: dict[str, str]) -> tuple[int, dict[str, str], dict[str, Any]]:
        """Approve the configured user: (status, headers, JSON body of a refusal)."""
        redirect = query.get("redirect_uri", "")
        if query.get("client_id") != CLIENT_ID:
            return 400, {}, {"error": "unauthorized_client"}
        if not redirect.endswith("/api/v1/sso/callback"):
            return 400, {}, {"error": "invalid_request", "error_description": "redirect_uri"}
        if query.get("response_type") != "code" or query.get("code_challenge_method") != "S256" \
                or not query.get("code_challenge") or "openid" not in query.get("scope", ""):
            return 400, {}, {"error": "invalid_request"}
        code = secrets.token_urlsafe(24)
        self.grants[code] = Grant(CLIENT_ID, redirect, query["code_challenge"],
                                  query.get("nonce", ""), dict(self.user))
        back = {"code": code, "state": query.get("state", ""), "iss": self.url}
        return 302, {"Location": redirect + "?" + urllib.parse.urlencode(back)}, {}

    def token(self, form: dict[str, str], authorization: str | None) -> tuple[int, dict[str, Any]]:
        def refuse(error: str, why: str) -> tuple[int, dict[str, Any]]:
            self.token_refusals.append(why)
            return (401 if error == "invalid_client" else 400), {"error": error,
                                                                 "error_description": why}

        expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        if authorization != f"Basic {expected}":
            return refuse("invalid_client", "client authentication failed")
        grant = self.grants.pop(form.get("code", ""), None)  # a code works once
        if form.get("grant_type") != "authorization_code" or grant is None:
            return refuse("invalid_grant", "unknown or used code")
        if form.get("redirect_uri") != grant.redirect_uri:
            return refuse("invalid_grant", "redirect_uri differs")
        verifier = form.get("code_verifier", "")
        challenge = base64.urlsafe_b64encode(
            hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if challenge != grant.challenge:
            return refuse("invalid_grant", "PKCE verifier does not match")
        return 200, {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer",
                     "expires_in": 300, "id_token": self.id_token(grant)}

    def id_token(self, grant: Grant) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {"iss": self.url, "aud": grant.client_id, "iat": now,
                                  "exp": now + 300, "nonce": grant.nonce, **grant.claims}
        claims.update(self.tamper.claims)
        for name in self.tamper.drop:
            claims.pop(name, None)
        key = _key(str(self.key.kid)) if self.tamper.foreign_key else self.key
        header = {"alg": "RS256", "kid": self.tamper.kid or str(self.key.kid)}
        return jwt.encode(header, claims, key)

    # -- HTTP ---------------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                del format, args

            def _json(self, status: int, body: dict[str, Any],
                      headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                issuer.requests.append(("GET", parts.path))
                if parts.path in issuer.broken:
                    self._json(500, {"error": "server_error"})
                elif parts.path == "/.well-known/openid-configuration":
                    self._json(200, issuer.discovery())
                elif parts.path == "/jwks":
                    self._json(200, issuer.jwks())
                elif parts.path == "/authorize":
                    query = dict(urllib.parse.parse_qsl(parts.query))
                    status, headers, body = issuer.authorize(query)
                    self._json(status, body, headers)
                else:
                    self._json(404, {"error": "not_found"})

            def do_POST(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                issuer.requests.append(("POST", parts.path))
                length = int(self.headers.get("Content-Length", "0"))
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                if parts.path in issuer.broken:
                    self._json(500, {"error": "server_error"})
                    return
                if parts.path != "/token":
                    self._json(404, {"error": "not_found"})
                    return
                status, body = issuer.token(form, self.headers.get("Authorization"))
                self._json(status, body, {"Cache-Control": "no-store"})

        return Handler


@contextmanager
def running_issuer() -> Iterator[Issuer]:
    issuer = Issuer().start()
    try:
        yield issuer
    finally:
        issuer.stop()
