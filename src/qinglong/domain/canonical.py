"""Canonical JSON and the SHA-256 content digests computed over it.

Our canonical form: UTF-8, object keys sorted, no insignificant whitespace, only
objects, arrays, strings, booleans, null and integers within +/-(2**53 - 1).
A digest is SHA-256 over ``<domain prefix> NUL <canonical JSON>`` as lowercase hex.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

from qinglong.errors import InvalidInput, RecordCorrupt

MAX_SAFE_INTEGER = 2**53 - 1
DIGEST_PATTERN = re.compile(r"^[0-9a-f]{64}$")

JsonValue = None | bool | int | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"]


def _check(value: object, path: str, depth: int) -> None:
    if depth > 16:
        raise InvalidInput(path, "nested too deeply (at most 16 levels)")
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise InvalidInput(path, "integer out of range")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(path, "object keys must be strings")
            _check(item, f"{path}.{key}", depth + 1)
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]", depth + 1)
        return
    raise InvalidInput(path, f"{type(value).__name__} is not allowed in canonical JSON")


def canonical_json(value: object) -> str:
    """Render ``value`` in the canonical form (raises InvalidInput on foreign types)."""
    _check(value, "$", 0)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_digest(prefix: str, value: object) -> str:
    """SHA-256 hex digest of ``prefix`` NUL ``canonical_json(value)``."""
    payload = prefix.encode("utf-8") + b"\x00" + canonical_json(value).encode("utf-8")
    return hashlib.sha256(payload).hexdigest()


def parse_json_object(text: str, what: str) -> dict[str, object]:
    """Parse stored JSON text that must be an object; a bad row is RecordCorrupt."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise RecordCorrupt(f"{what} is not valid JSON") from exc
    if not isinstance(value, dict):
        raise RecordCorrupt(f"{what} is not a JSON object")
    return value


def verify_digest(expected: str, actual: str, what: str) -> None:
    """Fail closed when a stored digest does not match the recomputed one."""
    if expected != actual:
        raise RecordCorrupt(f"{what} failed its content digest check")


class Digested(Protocol):
    """A record that carries the content digest computed when it was built."""

    @property
    def content_digest(self) -> str: ...


DigestedT = TypeVar("DigestedT", bound=Digested)


class Sealable(Digested, Protocol):
    """A dataclass record whose digest is taken over its own canonical ``content()``."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    def content(self) -> dict[str, object]:
        """What the digest covers: the record as JSON, ``content_digest`` and
        ``created_at_ms`` aside."""


SealableT = TypeVar("SealableT", bound=Sealable)


def sealed(record: SealableT, prefix: str) -> SealableT:
    """``record`` with its ``content_digest`` set: the digest of ``record.content()`` under
    ``prefix`` (how every revision gets its digest, when it is made and when it is read)."""
    return dataclasses.replace(record, content_digest=content_digest(prefix, record.content()))


def rebuild_verified(what: str, row: Mapping[str, object],
                     build: Callable[[], DigestedT]) -> DigestedT:
    """A stored record rebuilt by ``build`` (which validates it and computes its digest),
    failing closed: a record that no longer validates, or whose digest is not the row's
    ``content_digest``, is RecordCorrupt (``what`` names it)."""
    try:
        record = build()
    except InvalidInput as exc:
        raise RecordCorrupt(f"{what} is malformed ({exc.message})") from exc
    except (TypeError, ValueError, KeyError) as exc:
        raise RecordCorrupt(f"{what} is malformed") from exc
    verify_digest(str(row["content_digest"]), record.content_digest, what)
    return record
