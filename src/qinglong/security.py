"""Credential hygiene: passwords never come from the command line and never reach logs."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from qinglong.errors import InvalidInput

_KEYWORD_PASSWORD = re.compile(r"(?i)\bpassword\s*=")


def check_url_has_no_password(url: str) -> None:
    """Refuse a database URL that carries a password (use PGPASSWORD or a password file)."""
    parts = urlsplit(url)
    if parts.password is not None or _KEYWORD_PASSWORD.search(parts.query or ""):
        raise InvalidInput(
            "database-url",
            "must not contain a password; use PGPASSWORD, ~/.pgpass or QL_DATABASE_PASSWORD_FILE",
        )


def redact_url(url: str) -> str:
    """The URL with any password replaced, safe for logs and error messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return _KEYWORD_PASSWORD.sub("password=***", url) if "password" in url.lower() else url
    netloc = parts.netloc.replace(":" + parts.password + "@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
