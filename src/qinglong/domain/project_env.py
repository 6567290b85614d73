"""A project's environment (docs/controls/environments.md): named values injected into every
Run of the project's tasks, each plain or secret, enabled or not, with a description; every
change an immutable revision whose digest covers what a Run would see.

Pure: the values' digests and the seals are made by the store (storage/project_env.py) with
the keyring; here are the rules, the entries as stored, and the revision digest.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from qinglong.domain.task_env import ENV_NAME, RESERVED_ENV_PREFIX, plain_text
from qinglong.errors import InvalidInput

MAX_ENTRIES = 256
MAX_VALUE_BYTES = 64 * 1024  # one value
MAX_TOTAL_BYTES = 256 * 1024  # every value of a project together
MAX_DESCRIPTION = 1024
PLAIN_DIGEST = "sha256:"  # of project, name and value: plain values are shown anyway
SECRET_DIGEST = "hmac-sha256:"  # noqa: S105 - a prefix; keyed by the database's digest key: reveals nothing


# an entry's name (the API's path parameter states it): a task's rule, QL_ left out
VARIABLE_NAME = re.compile(r"^(?![Qq][Ll]_)[A-Za-z_][A-Za-z0-9_]{0,127}$")
VARIABLE_NAME_RULE = ("must match [A-Za-z_][A-Za-z0-9_]* (at most 128 characters), not "
                      "starting with the reserved prefix QL_")


def variable_name(value: object, field: str = "variable") -> str:
    if not isinstance(value, str) or not ENV_NAME.fullmatch(value):
        raise InvalidInput(field, "must match [A-Za-z_][A-Za-z0-9_]* (at most 128 characters)")
    if value.upper().startswith(RESERVED_ENV_PREFIX):
        raise InvalidInput(field, f"{value!r} uses the reserved prefix QL_")
    assert VARIABLE_NAME.fullmatch(value)
    return value


def variable_value(value: object, field: str = "value") -> str:
    text = plain_text(value, field)
    if len(text.encode("utf-8")) > MAX_VALUE_BYTES:
        raise InvalidInput(field, f"must be at most {MAX_VALUE_BYTES} bytes")
    return text


def description_text(value: object, field: str = "description") -> str:
    text = plain_text(value, field)
    if len(text) > MAX_DESCRIPTION or any(ord(c) < 32 for c in text):
        raise InvalidInput(field, f"must be one line of at most {MAX_DESCRIPTION} characters")
    return text


def digest_message(project_id: str, name: str, value: str) -> bytes:
    return b"\x00".join(part.encode("utf-8") for part in (project_id, name, value))


def plain_digest(project_id: str, name: str, value: str) -> str:
    return PLAIN_DIGEST + hashlib.sha256(digest_message(project_id, name, value)).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredVariable:
    """One entry of a revision as stored: a plain value, or a secret's seal and key id."""

    name: str
    enabled: bool
    secret: bool
    description: str
    value_digest: str
    value: str | None = None  # plain entries only
    sealed: str | None = None  # secret entries only
    key_id: str | None = None

    def same_content(self, other: StoredVariable) -> bool:
        return (self.enabled, self.secret, self.description, self.value_digest) == (
            other.enabled, other.secret, other.description, other.value_digest)


def revision_digest(entries: Sequence[StoredVariable]) -> str:
    """SHA-256 of what a Run of the revision sees: each name, whether it is enabled, and
    its value's digest (never a value), in name order."""
    canonical = json.dumps([[e.name, e.enabled, e.value_digest]
                            for e in sorted(entries, key=lambda e: e.name)],
                           separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def check_revision(entries: Sequence[StoredVariable]) -> None:
    if len(entries) > MAX_ENTRIES:
        raise InvalidInput("name", f"a project has at most {MAX_ENTRIES} environment entries")


def check_total(sizes: Sequence[int]) -> None:
    if sum(sizes) > MAX_TOTAL_BYTES:
        raise InvalidInput("value", f"a project's values are at most {MAX_TOTAL_BYTES} bytes "
                                    "together")


@dataclass(frozen=True, slots=True, kw_only=True)
class LeasedVariable:
    """An enabled entry as a worker gets it with its lease: plain, or sealed."""

    name: str
    value: str | None
    sealed: str | None
    key_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeasedEnvironment:
    """The project's environment at the revision an Attempt was leased with."""

    project_id: str
    revision: int
    digest: str
    variables: tuple[LeasedVariable, ...]
