"""Loading a long-running process's settings: command-line flags over environment variables,
validated before anything connects; an unknown variable under the process's prefix is refused
like an unknown flag, and every error names the option as the user would type it."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_settings import BaseSettings

from qinglong.api.health import parse_listen
from qinglong.domain.identifiers import OWNER_ID
from qinglong.errors import InvalidConfig
from qinglong.storage.open import capabilities_of

S = TypeVar("S", bound=BaseSettings)


def load_settings(model: type[S], *, prefix: str, command: str, flags: dict[str, Any]) -> S:
    """``model`` from ``flags`` (only those given) over ``<prefix>*`` variables and
    ``QL_DATABASE_URL``."""
    known = {prefix + name.upper() for name in model.model_fields}
    unknown = sorted(k for k in os.environ if k.startswith(prefix) and k not in known)
    if unknown:
        raise InvalidConfig(unknown[0], f"is not a known {command} setting")
    given = {k: v for k, v in flags.items() if v is not None}
    if "database_url" in given:
        given["QL_DATABASE_URL"] = given.pop("database_url")
    try:
        return model(**given)
    except ValidationError as exc:
        first = exc.errors()[0]
        location = str(first["loc"][0]) if first["loc"] else "config"
        field = "--database-url" if location == "QL_DATABASE_URL" else (
            "--" + location.replace("_", "-"))  # named as its flag (or the flag's variable)
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "missing":
            message = "is required (flag or environment)"
        raise InvalidConfig(field, message) from None


# Validators the long-running processes share (pydantic calls them with the field's value).


def process_name(value: str) -> str:
    if not OWNER_ID.fullmatch(value):
        raise ValueError("must be 1-128 letters, digits, '.', '_', ':' or '-', starting with a "
                         "letter or digit")
    return value


def postgres_url(command: str, hint: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not capabilities_of(value).shared:
            raise ValueError(f"{command} needs a postgresql:// URL{hint}")
        return value

    return check


def listen_address(value: str) -> str:
    try:
        parse_listen(value)
    except InvalidConfig as exc:
        raise ValueError(exc.message) from None
    return value
