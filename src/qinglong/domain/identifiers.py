"""Identifier rules shared by every surface (CLI, storage, cluster claims)."""

from __future__ import annotations

import re

from qinglong.errors import InvalidInput

PROJECT_ID = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,126}[a-z0-9])?$")
ENTITY_ID = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,126}[A-Za-z0-9_])?$")
OWNER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
# A Run or a notification delivery named by its UUID or the start of it (any case); a Run
# by at least MIN_RUN_PREFIX characters of it.
UUID_REF = re.compile(r"^[0-9A-Fa-f-]{1,36}$")
MIN_RUN_PREFIX = 8
RUN_REF = re.compile(rf"^[0-9A-Fa-f-]{{{MIN_RUN_PREFIX},36}}$")
WHOLE_UUID = re.compile(r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-"
                        r"[0-9A-Fa-f]{12}$")
TOKEN_ID = re.compile(r"^[0-9a-f]{16}$")  # the 16 characters after qlt_
DISPLAY_NAME_MAX = 255
DISPLAY_NAME = re.compile(rf"^[^\x00-\x1f\x7f]{{1,{DISPLAY_NAME_MAX}}}$")  # no control characters

PROJECT_ID_RULE = (
    "must be 1-128 characters of lowercase letters, digits and '-', "
    "starting and ending with a letter or digit"
)
ENTITY_ID_RULE = (
    "must be 1-128 characters of letters, digits, '.', '_' and '-', "
    "starting with a letter or digit and not ending with '.' or '-'"
)
RUN_REF_RULE = "must be a Run id (a UUID) or a prefix of 8 or more of its characters"
DELIVERY_REF_RULE = "is not a delivery id (or the start of one)"
TOKEN_ID_RULE = "is not a token id (the 16 characters after qlt_)"  # noqa: S105 - a rule
OWNER_ID_RULE = (
    "must be 1-128 characters of letters, digits, '.', '_', ':' and '-', "
    "starting with a letter or digit"
)


def matching(value: object, field: str, pattern: re.Pattern[str], rule: str) -> str:
    """``value`` when it is a string ``pattern`` matches, else InvalidInput(field, rule)."""
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise InvalidInput(field, rule)
    return value


def project_id(value: str, field: str = "project") -> str:
    return matching(value, field, PROJECT_ID, PROJECT_ID_RULE)


def entity_id(value: str, field: str) -> str:
    return matching(value, field, ENTITY_ID, ENTITY_ID_RULE)


def owner_id(value: str, field: str = "owner-id") -> str:
    return matching(value, field, OWNER_ID, OWNER_ID_RULE)


def display_name(value: str, field: str = "name") -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= DISPLAY_NAME_MAX:
        raise InvalidInput(field, f"must be 1-{DISPLAY_NAME_MAX} characters")
    if not DISPLAY_NAME.fullmatch(value):
        raise InvalidInput(field, "must not contain control characters")
    return value


def actor_name(value: str, field: str = "actor") -> str:
    """Who asked for an operator action (a user name, a token's owner): recorded, not
    trusted for anything."""
    return display_name(value, field)
