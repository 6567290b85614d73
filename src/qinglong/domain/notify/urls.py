"""The URLs a channel sends to: absolute http(s), with a host, without credentials or a
fragment (``channels`` and ``services`` check them)."""

from __future__ import annotations

from urllib.parse import urlsplit

from qinglong.errors import InvalidInput

MAX_URL = 2048


def check_http_url(url: str, field: str = "url") -> str:
    """An absolute http(s) URL with a host and no credentials or fragment."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL or any(c.isspace() for c in url):
        raise InvalidInput(field, f"must be an http:// or https:// URL of at most {MAX_URL} "
                                  "characters, without spaces")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidInput(field, f"{url!r} is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(field, f"{url!r} must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput(field, "must not carry credentials (user:password@); use the "
                                  "channel's secret or a --header")
    if parts.fragment:
        raise InvalidInput(field, "must not have a #fragment")
    del port
    return url

