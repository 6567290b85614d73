"""What the operator configures for single sign-on with OpenID Connect, checked at start-up
(docs/security.md#single-sign-on): every mistake is an InvalidConfig naming the option."""

from __future__ import annotations

import ipaddress
import urllib.parse
from dataclasses import dataclass

from qinglong.errors import InvalidConfig

USER_CLAIMS = ("preferred_username", "email")
CALLBACK_PATH = "/api/v1/sso/callback"
DEFAULT_SCOPES = "openid profile email"
PENDING_LIFETIME_MS = 10 * 60_000  # a login must come back from the provider within this
ROLES = ("none", "viewer", "operator", "admin")  # none: only what grants give


def loopback(host: str) -> bool:
    """A host name (without port or brackets) is loopback."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_endpoint(url: str, what: str, option: str = "--oidc-issuer") -> str:
    """An absolute https URL (http only to a loopback host), without a fragment."""
    parts = urllib.parse.urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("https", "http") or not host or parts.fragment \
            or parts.username is not None or any(ord(c) <= 0x20 for c in url):
        raise InvalidConfig(option, f"{what} must be an absolute https URL (got {url!r})")
    if parts.scheme == "http" and not loopback(host):
        raise InvalidConfig(option, f"{what} must use https (plain http only on loopback, "
                                    f"for tests); got {url!r}")
    return url


@dataclass(frozen=True, slots=True, kw_only=True)
class SsoSettings:
    issuer: str
    client_id: str
    client_secret: str
    user_claim: str = "preferred_username"
    create_role: str | None = None  # None: an unknown user is refused
    redirect_uri: str | None = None  # None: this server's origin + CALLBACK_PATH
    scopes: str = DEFAULT_SCOPES
    pending_lifetime_ms: int = PENDING_LIFETIME_MS

    def __post_init__(self) -> None:
        check_endpoint(self.issuer, "the issuer")
        if urllib.parse.urlsplit(self.issuer).query:
            raise InvalidConfig("--oidc-issuer", "the issuer has no query string")
        if not self.client_id or len(self.client_id) > 255 or not self.client_id.isprintable():
            raise InvalidConfig("--oidc-client-id", "must be 1-255 printable characters")
        if not self.client_secret or len(self.client_secret) > 4096:
            raise InvalidConfig("--oidc-client-secret-file",
                                "the client secret is empty (give it in a file with "
                                "--oidc-client-secret-file, or in $QL_OIDC_CLIENT_SECRET)")
        if self.user_claim not in USER_CLAIMS:
            raise InvalidConfig("--oidc-user-claim", "must be one of " + ", ".join(USER_CLAIMS))
        if self.create_role is not None and self.create_role not in ROLES:
            raise InvalidConfig("--oidc-create-users", "must be one of " + ", ".join(ROLES))
        if self.redirect_uri is not None:
            check_endpoint(self.redirect_uri, "the redirect URI", "--oidc-redirect-uri")
            if urllib.parse.urlsplit(self.redirect_uri).path != CALLBACK_PATH:
                raise InvalidConfig("--oidc-redirect-uri",
                                    f"must end in {CALLBACK_PATH} (this server's callback)")
