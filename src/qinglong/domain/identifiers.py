"""Identifier rules shared by every surface (CLI, storage, cluster claims)."""

from __future__ import annotations

import re

from qinglong.errors import InvalidInput

PROJECT_ID = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,126}[a-z0-9])?$")
ENTITY_ID = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,126}[A-Za-z0-9_])?$")
OWNER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")

PROJECT_ID_RULE = (
    "must be 1-128 characters of lowercase letters, digits and '-', "
    "starting and ending with a letter or digit"
)
ENTITY_ID_RULE = (
    "must be 1-128 characters of letters, digits, '.', '_' and '-', "
    "starting with a letter or digit and not ending with '.' or '-'"
)
OWNER_ID_RULE = (
    "must be 1-128 characters of letters, digits, '.', '_', ':' and '-', "
    "starting with a letter or digit"
)


def project_id(value: str, field: str = "project") -> str:
    if not isinstance(value, str) or not PROJECT_ID.fullmatch(value):
        raise InvalidInput(field, PROJECT_ID_RULE)
    return value


def entity_id(value: str, field: str) -> str:
    if not isinstance(value, str) or not ENTITY_ID.fullmatch(value):
        raise InvalidInput(field, ENTITY_ID_RULE)
    return value


def owner_id(value: str, field: str = "owner-id") -> str:
    if not isinstance(value, str) or not OWNER_ID.fullmatch(value):
        raise InvalidInput(field, OWNER_ID_RULE)
    return value


def display_name(value: str, field: str = "name") -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 255:
        raise InvalidInput(field, "must be 1-255 characters")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise InvalidInput(field, "must not contain control characters")
    return value


def actor_name(value: str, field: str = "actor") -> str:
    """Who asked for an operator action (a user name, a token's owner): recorded, not
    trusted for anything."""
    return display_name(value, field)
