"""The secret key of project environments (docs/controls/environments.md): its text form,
where a process finds it, and sealing and opening one value with it.

A key is 32 random bytes, written ``qlk1:<base64url>`` (one line) in a key file or in
``QL_SECRET_KEY``; ``QL_SECRET_KEY_FILE`` names the file. Its id is the first 16 hex digits
of a SHA-256 of the key: it is stored beside every ciphertext, so a wrong key is named at
once instead of failing as a corrupt value. Values are sealed with AES-256-GCM (a fresh
96-bit nonce each), bound to their project and name (the associated data), so a ciphertext
copied to another entry does not open.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from qinglong.errors import SecretKeyMismatch, SecretKeyMissing

KEY_PREFIX = "qlk1:"
KEY_BYTES = 32
NONCE_BYTES = 12
KEY_FILE_MAX = 4096
KEY_ENV = "QL_SECRET_KEY"
KEY_FILE_ENV = "QL_SECRET_KEY_FILE"


@dataclass(frozen=True, slots=True)
class SecretKey:
    raw: bytes

    def __repr__(self) -> str:  # never the key itself
        return f"SecretKey({self.key_id})"

    @property
    def key_id(self) -> str:
        return hashlib.sha256(b"qinglong secret key id\x00" + self.raw).hexdigest()[:16]


def new_key_text() -> str:
    """A new random key in its text form."""
    return KEY_PREFIX + base64.urlsafe_b64encode(os.urandom(KEY_BYTES)).decode().rstrip("=")


def parse_key(text: str, source: str) -> SecretKey:
    """A key from its text form (surrounding blanks ignored); ``source`` names where it
    came from in the refusal, which never quotes the text."""
    body = text.strip()
    if not body.startswith(KEY_PREFIX):
        raise SecretKeyMissing(source, f"is not a qinglong secret key (it starts with "
                                       f"{KEY_PREFIX!r}; make one with `ql secret new-key`)")
    encoded = body[len(KEY_PREFIX):]
    try:
        raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != KEY_BYTES:
        raise SecretKeyMissing(source, f"is not a qinglong secret key ({KEY_BYTES} bytes in "
                                       "base64url after the prefix)")
    return SecretKey(raw)


def read_key_file(path: Path, source: str) -> SecretKey:
    """The key in a regular file of at most KEY_FILE_MAX bytes (a device or a pipe is refused
    before anything is read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SecretKeyMissing(source, f"cannot read {str(path)!r} ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SecretKeyMissing(source, f"{str(path)!r} is not a regular file")
        data = os.read(fd, KEY_FILE_MAX + 1)
    finally:
        os.close(fd)
    if len(data) > KEY_FILE_MAX:
        raise SecretKeyMissing(source, f"{str(path)!r} is larger than a key file")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise SecretKeyMissing(source, f"{str(path)!r} is not a qinglong secret key") from None
    return parse_key(text, source)


def key_from(environ: Mapping[str, str]) -> SecretKey | None:
    """This process's key: ``QL_SECRET_KEY``, else the file ``QL_SECRET_KEY_FILE`` names;
    None when neither is set."""
    text = environ.get(KEY_ENV)
    if text:
        return parse_key(text, KEY_ENV)
    path = environ.get(KEY_FILE_ENV)
    if path:
        return read_key_file(Path(path), KEY_FILE_ENV)
    return None


def key_from_environment() -> SecretKey | None:
    return key_from(os.environ)


def require(key: SecretKey | None, why: str) -> SecretKey:
    if key is None:
        raise SecretKeyMissing(KEY_ENV, f"{why} needs the secret key: set {KEY_ENV} or "
                                        f"{KEY_FILE_ENV} (docs/controls/environments.md)")
    return key


def _aead(key: SecretKey):  # type: ignore[no-untyped-def]  # loaded only when sealing
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key.raw)


def seal(key: SecretKey, plaintext: bytes, context: bytes) -> str:
    """``plaintext`` sealed under ``key``, bound to ``context``: base64 of nonce and
    ciphertext."""
    nonce = os.urandom(NONCE_BYTES)
    sealed = _aead(key).encrypt(nonce, plaintext, context)
    return base64.b64encode(nonce + sealed).decode("ascii")


def open_sealed(key: SecretKey, key_id: str, sealed: str, context: bytes, what: str) -> bytes:
    """What ``seal`` sealed; SecretKeyMismatch when it was sealed under another key or does
    not open (altered, or moved to another entry)."""
    from cryptography.exceptions import InvalidTag

    if key_id != key.key_id:
        raise SecretKeyMismatch(KEY_ENV, f"{what} is sealed under key {key_id}, and this "
                                         f"process has key {key.key_id}")
    try:
        data = base64.b64decode(sealed.encode("ascii"), validate=True)
        return bytes(_aead(key).decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], context))
    except (InvalidTag, binascii.Error, ValueError):
        raise SecretKeyMismatch(KEY_ENV, f"{what} does not open with key {key.key_id} (it "
                                         "was altered, or belongs to another entry)") from None


def keyed_digest(digest_key: bytes, message: bytes) -> str:
    return hmac.new(digest_key, message, hashlib.sha256).hexdigest()
