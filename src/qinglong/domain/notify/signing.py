"""Webhook signatures: HMAC-SHA256 with the channel's secret over ``<timestamp>.<body>``.

The sender puts the Unix time (seconds) of the attempt in ``X-Qinglong-Timestamp`` and
``v1=<hex digest>`` in ``X-Qinglong-Signature``. A receiver recomputes the digest over the
timestamp it received, a dot and the raw body, compares in constant time, and refuses a
timestamp too far from its own clock (a replayed request carries an old one, and changing it
breaks the signature). ``verify`` is that check, for receivers written in Python.
"""

from __future__ import annotations

import hashlib
import hmac

VERSION = "v1"
EVENT_HEADER = "X-Qinglong-Event"
DELIVERY_HEADER = "X-Qinglong-Delivery"
TIMESTAMP_HEADER = "X-Qinglong-Timestamp"
SIGNATURE_HEADER = "X-Qinglong-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
DEFAULT_TOLERANCE_S = 300


def digest(secret: str, timestamp_s: int, body: bytes) -> str:
    signed = str(timestamp_s).encode("ascii") + b"." + body
    return hmac.new(secret.encode("utf-8"), signed, hashlib.sha256).hexdigest()


def signature(secret: str, timestamp_s: int, body: bytes) -> str:
    """The value of ``X-Qinglong-Signature``."""
    return f"{VERSION}={digest(secret, timestamp_s, body)}"


def verify(secret: str, *, timestamp: str, signature_header: str, body: bytes, now_s: int,
           tolerance_s: int = DEFAULT_TOLERANCE_S) -> bool:
    """True when ``signature_header`` signs ``body`` at ``timestamp`` with ``secret`` and the
    timestamp lies within ``tolerance_s`` of ``now_s``. Several comma-separated signatures
    are accepted (one valid is enough), so a receiver can rotate secrets."""
    if not timestamp.isdigit() or abs(now_s - int(timestamp)) > tolerance_s:
        return False
    expected = digest(secret, int(timestamp), body)
    for part in signature_header.split(","):
        version, _, value = part.strip().partition("=")
        if version == VERSION and hmac.compare_digest(value, expected):
            return True
    return False
