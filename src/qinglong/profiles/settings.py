"""Loading a long-running process's settings: command-line flags over environment variables,
validated before anything connects; an unknown variable under the process's prefix is refused
like an unknown flag, and every error names the option as the user would type it."""

from __future__ import annotations

import os
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_settings import BaseSettings

from qinglong.errors import InvalidConfig

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
        field = "database-url" if location == "QL_DATABASE_URL" else location.replace("_", "-")
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "missing":
            message = "is required (flag or environment)"
        raise InvalidConfig(field, message) from None
