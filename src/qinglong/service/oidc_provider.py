"""The OpenID Connect provider as the single sign-on sees it: its discovery document, its
signing keys (JWKS), the token endpoint, and the checks of an ID token.

- **Discovery** (``discover``) reads ``<issuer>/.well-known/openid-configuration`` once, at
  start-up: the document must name the same issuer, an authorization, a token and a JWKS
  endpoint (https, or http on a loopback host), support the ``code`` response type and PKCE
  ``S256``; anything else is a configuration error that stops the server, saying what.
- **Keys** are fetched when first needed and cached; a token signed with a key id the cache
  does not hold fetches them again (the provider rotated), at most once per
  ``JWKS_REFETCH_S``, so forged key ids cannot make the server hammer the provider.
- **An ID token** is accepted only signed by one of the issuer's keys with an asymmetric
  algorithm, from the issuer, for this client (``aud``, and ``azp`` when there are several
  audiences), unexpired and issued no later than now on the injected clock (``LEEWAY_MS``
  either side), carrying the nonce of the login it answers and a subject.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

from qinglong.clock import Clock
from qinglong.errors import InvalidConfig, SsoProviderFailed, SsoRefused
from qinglong.service.sso_settings import SsoSettings, check_endpoint

SIGNING_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
                      "ES512", "EdDSA")
LEEWAY_MS = 60_000
JWKS_REFETCH_S = 30.0
MAX_ANSWER_BYTES = 1024 * 1024
TIMEOUT_S = 10.0

Fetch = Callable[[urllib.request.Request], bytes]


class ProviderRefused(SsoProviderFailed):
    """The provider answered a request with a 4xx status."""


def fetch(request: urllib.request.Request) -> bytes:
    """One HTTP exchange with the provider: the body of a 2xx answer, else an error saying
    what came back. Redirects are not followed for POSTs (urllib's rule)."""
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:  # noqa: S310
            body: bytes = answer.read(MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:
        detail = exc.read(2048).decode("utf-8", "replace")
        failed = ProviderRefused if 400 <= exc.code < 500 else SsoProviderFailed
        raise failed(f"{request.full_url} answered {exc.code}: {detail[:300]}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SsoProviderFailed(f"cannot reach {request.full_url} ({reason})") from None
    if len(body) > MAX_ANSWER_BYTES:
        raise SsoProviderFailed(f"{request.full_url} answered more than {MAX_ANSWER_BYTES} "
                                "bytes")
    return body


def _request(url: str, *, headers: dict[str, str], method: str = "GET",
             data: bytes | None = None) -> urllib.request.Request:
    """A request to the provider: every URL here passed ``check_endpoint`` (https, or http
    on a loopback host), never file: or another scheme."""
    return urllib.request.Request(url, data=data, headers=headers,  # noqa: S310
                                  method=method)


def _json_object(body: bytes, what: str) -> dict[str, Any]:
    try:
        found = json.loads(body)
    except ValueError:
        raise SsoProviderFailed(f"{what} is not JSON") from None
    if not isinstance(found, dict):
        raise SsoProviderFailed(f"{what} is not a JSON object")
    return found


def pkce_challenge(verifier: str) -> str:
    """The S256 code challenge of a PKCE verifier (RFC 7636 4.2)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoints:
    authorization: str
    token: str
    jwks: str
    auth_methods: tuple[str, ...]  # token endpoint client authentication


def read_discovery(settings: SsoSettings, document: Mapping[str, Any]) -> Endpoints:
    """The endpoints of a discovery document, or InvalidConfig saying what is wrong."""
    where = f"the discovery document of {settings.issuer}"
    if document.get("issuer") != settings.issuer:
        raise InvalidConfig("--oidc-issuer", f"{where} names the issuer "
                                             f"{document.get('issuer')!r}: give exactly that")
    found: dict[str, str] = {}
    for key in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        value = document.get(key)
        if not isinstance(value, str):
            raise InvalidConfig("--oidc-issuer", f"{where} has no {key}")
        found[key] = check_endpoint(value, f"{where}: {key}")
    if "code" not in document.get("response_types_supported", ["code"]):
        raise InvalidConfig("--oidc-issuer", f"{where} does not offer the code flow")
    methods = document.get("code_challenge_methods_supported")
    if not isinstance(methods, list) or "S256" not in methods:
        raise InvalidConfig("--oidc-issuer", f"{where} does not say it supports PKCE S256 "
                                             "(code_challenge_methods_supported)")
    auth = document.get("token_endpoint_auth_methods_supported", ["client_secret_basic"])
    usable = tuple(m for m in auth if m in ("client_secret_basic", "client_secret_post"))
    if not usable:
        raise InvalidConfig("--oidc-issuer", f"{where}: the token endpoint takes neither "
                                             "client_secret_basic nor client_secret_post")
    return Endpoints(authorization=found["authorization_endpoint"],
                     token=found["token_endpoint"], jwks=found["jwks_uri"],
                     auth_methods=usable)


class OidcProvider:
    """One issuer, as configured; ``discover`` before anything else."""

    def __init__(self, settings: SsoSettings, clock: Clock, *, http: Fetch = fetch) -> None:
        self.settings = settings
        self._clock = clock
        self._http = http
        self._endpoints: Endpoints | None = None
        self._keys: KeySet | None = None
        self._keys_at: float | None = None
        self._lock = threading.Lock()

    @property
    def endpoints(self) -> Endpoints:
        if self._endpoints is None:
            raise SsoProviderFailed("the provider's discovery document was not read")
        return self._endpoints

    def discover(self) -> Endpoints:
        url = self.settings.issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            body = self._http(_request(url, headers={"Accept": "application/json"}))
            document = _json_object(body, f"the discovery document {url}")
        except SsoProviderFailed as exc:
            raise InvalidConfig("--oidc-issuer", f"discovery failed: {exc.message}") from None
        self._endpoints = read_discovery(self.settings, document)
        return self._endpoints

    def authorization_url(self, *, state: str, nonce: str, verifier: str,
                          redirect_uri: str) -> str:
        query = urllib.parse.urlencode({
            "response_type": "code", "client_id": self.settings.client_id,
            "redirect_uri": redirect_uri, "scope": self.settings.scopes, "state": state,
            "nonce": nonce, "code_challenge": pkce_challenge(verifier),
            "code_challenge_method": "S256"})
        base = self.endpoints.authorization
        return base + ("&" if urllib.parse.urlsplit(base).query else "?") + query

    def exchange(self, *, code: str, verifier: str, redirect_uri: str) -> str:
        """The ID token the token endpoint gives for ``code`` (with the PKCE verifier and
        the client's credentials)."""
        form = {"grant_type": "authorization_code", "code": code,
                "redirect_uri": redirect_uri, "code_verifier": verifier}
        headers = {"Accept": "application/json",
                   "Content-Type": "application/x-www-form-urlencoded"}
        settings = self.settings
        if "client_secret_basic" in self.endpoints.auth_methods:
            pair = (urllib.parse.quote(settings.client_id, safe="") + ":"
                    + urllib.parse.quote(settings.client_secret, safe=""))
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form.update(client_id=settings.client_id, client_secret=settings.client_secret)
        request = _request(self.endpoints.token, method="POST", headers=headers,
                                         data=urllib.parse.urlencode(form).encode())
        try:
            body = self._http(request)
        except ProviderRefused as exc:  # the code, the verifier or the client
            raise SsoRefused(f"the provider refused the code: {exc.message}") from None
        answer = _json_object(body, "the token endpoint's answer")
        token = answer.get("id_token")
        if not isinstance(token, str) or not token:
            raise SsoProviderFailed("the token endpoint's answer has no id_token")
        return token

    def _key_set(self, *, again: bool) -> KeySet:
        with self._lock:
            now = self._clock.monotonic()
            stale = (again and (self._keys_at is None
                                or now - self._keys_at >= JWKS_REFETCH_S))
            if self._keys is None or stale:
                body = self._http(_request(
                    self.endpoints.jwks, headers={"Accept": "application/json"}))
                try:
                    self._keys = KeySet.import_key_set(
                        _json_object(body, "the JWKS document"))  # type: ignore[arg-type]
                except (JoseError, ValueError, KeyError, TypeError) as exc:
                    raise SsoProviderFailed(f"the provider's JWKS cannot be read ({exc})") \
                        from None
                self._keys_at = now
            return self._keys

    def _decode(self, token: str) -> dict[str, Any]:
        for again in (False, True):
            try:
                return dict(jwt.decode(token, self._key_set(again=again),
                                       algorithms=SIGNING_ALGORITHMS).claims)
            except InvalidKeyIdError:
                if again:
                    raise SsoRefused("the ID token is signed with a key the issuer does not "
                                     "publish") from None
            except JoseError as exc:
                raise SsoRefused(f"the ID token's signature does not hold ({exc.error})") \
                    from None
            except (ValueError, TypeError):
                raise SsoRefused("the ID token cannot be read") from None
        raise AssertionError("unreachable")

    def verify(self, token: str, *, nonce: str) -> dict[str, Any]:
        """The claims of an ID token that holds (see the module's docstring), else
        SsoRefused naming the first check it failed."""
        claims = self._decode(token)
        settings = self.settings
        if claims.get("iss") != settings.issuer:
            raise SsoRefused("the ID token is from another issuer")
        audience = claims.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience
        if not isinstance(audiences, list) or settings.client_id not in audiences:
            raise SsoRefused("the ID token is not meant for this client (aud)")
        if len(audiences) > 1 and claims.get("azp") != settings.client_id:
            raise SsoRefused("the ID token names several audiences but not this client as azp")
        now_ms = self._clock.now_ms()
        expires, issued = claims.get("exp"), claims.get("iat")
        if not _number(expires) or not _number(issued):
            raise SsoRefused("the ID token lacks exp or iat")
        if expires * 1000 <= now_ms - LEEWAY_MS:
            raise SsoRefused("the ID token has expired")
        if issued * 1000 > now_ms + LEEWAY_MS:
            raise SsoRefused("the ID token is issued in the future (check the clocks)")
        if not isinstance(claims.get("nonce"), str) or claims["nonce"] != nonce:
            raise SsoRefused("the ID token does not carry this login's nonce")
        subject = claims.get("sub")
        if not isinstance(subject, str) or not 1 <= len(subject) <= 255:
            raise SsoRefused("the ID token has no usable subject (sub)")
        return claims


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
