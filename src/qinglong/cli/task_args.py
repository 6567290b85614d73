"""What `ql task publish` reads from its command line beyond what click checks: retry
settings to change, exit codes, and secret environment entries taken from this command's
environment (never from the command line)."""

from __future__ import annotations

import os

from qinglong.domain.task import ENV_NAME, EnvEntry
from qinglong.errors import InvalidInput


def exit_codes(text: str) -> tuple[int, ...]:
    if text.strip().lower() == "any":
        return ()
    codes = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or not 1 <= int(part) <= 255:
            raise InvalidInput("retry-on-exit", f"{part!r} is not an exit code from 1 to 255 "
                                                "(write codes like 1,75 or 'any')")
        codes.append(int(part))
    return tuple(codes)


def retry_changes(max_attempts: int | None, backoff: int | None, max_backoff: int | None,
                   on_exit: str | None, on_timeout: bool | None) -> dict[str, object]:
    """The retry settings given on the command line; the others keep their value."""
    given: dict[str, object] = {"max_attempts": max_attempts, "backoff_ms": backoff,
                                "max_backoff_ms": max_backoff, "on_timeout": on_timeout,
                                "on_exit_codes": None if on_exit is None else exit_codes(on_exit)}
    return {name: value for name, value in given.items() if value is not None}


def secret_entries(pairs: tuple[str, ...]) -> tuple[EnvEntry, ...]:
    """``--secret-env NAME=VAR``: a secret entry whose value is ``$VAR`` of this command (so it
    is on no command line)."""
    entries = []
    for pair in pairs:
        name, found, variable = pair.partition("=")
        if not found or not ENV_NAME.fullmatch(variable):
            raise InvalidInput("--secret-env", f"{pair!r} must have the form NAME=VAR (VAR: "
                                               "an environment variable of this command)")
        value = os.environ.get(variable)
        if value is None:
            raise InvalidInput("--secret-env", f"the environment variable {variable} is not set")
        try:
            entries.append(EnvEntry(name=name, value=value))
        except InvalidInput as exc:
            raise InvalidInput("--secret-env", exc.rule) from None
    return tuple(entries)
