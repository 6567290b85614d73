"""Rules for text and JSON that come from outside (HTTP bodies, query strings, path
parameters, command-line arguments, JSON given on the command line).

Text must be encodable as UTF-8: a lone surrogate (``\\ud800``, which JSON escapes and
undecodable command-line bytes can produce) is refused, because nothing that stores or
prints it could give it back. JSON must be JSON (no ``NaN`` or ``Infinity``), nest at most
``MAX_JSON_DEPTH`` levels and carry numbers a database can hold (whole numbers within 64
bits, finite fractions).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from qinglong.errors import InvalidInput

MAX_JSON_DEPTH = 32
MIN_JSON_INT, MAX_JSON_INT = -(2**63), 2**63 - 1
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")  # C0 but tab and newline, and DEL
SURROGATE_RULE = "is not valid text (it holds a lone UTF-16 surrogate, which UTF-8 cannot encode)"


class NotJson(ValueError):
    """The text is not JSON at all (a syntax error, NaN or Infinity, not UTF-8)."""


def has_lone_surrogate(text: str) -> bool:
    return LONE_SURROGATE.search(text) is not None


def check_text(value: str, field: str, *, max_length: int | None = None,
               controls: bool = True) -> str:
    """``value`` as given, if it is encodable text (and at most ``max_length`` characters,
    and without control characters unless ``controls``)."""
    if has_lone_surrogate(value):
        raise InvalidInput(field, SURROGATE_RULE)
    if max_length is not None and len(value) > max_length:
        raise InvalidInput(field, f"is longer than {max_length} characters")
    if not controls and CONTROL.search(value):
        raise InvalidInput(field, "must not contain control characters")
    return value


def _child(where: str, key: str) -> str:
    return key if where == "body" else f"{where}.{key}"


def check_json_value(value: Any, field: str = "body", *,
                     max_depth: int = MAX_JSON_DEPTH) -> None:
    """Every string (keys too) encodable, every whole number within 64 bits, objects and
    arrays nested at most ``max_depth`` deep (``{"a": [1]}`` is 2). Walks without
    recursing."""
    pending: list[tuple[Any, int, str]] = [(value, 0, field)]
    while pending:
        item, depth, where = pending.pop()
        if isinstance(item, str):
            check_text(item, where)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidInput(where, "is a number out of range")
        elif isinstance(item, int):
            if not MIN_JSON_INT <= item <= MAX_JSON_INT:
                raise InvalidInput(where, "is a number out of range (at most 64 bits)")
        elif isinstance(item, dict | list):
            depth += 1
            if depth > max_depth:
                raise InvalidInput(field, f"nests deeper than {max_depth} levels")
            if isinstance(item, dict):
                for key, inner in item.items():
                    check_text(key, where)
                    pending.append((inner, depth, _child(where, key)))
            else:
                pending.extend((inner, depth, f"{where}[{index}]")
                               for index, inner in enumerate(item))


def _no_constant(name: str) -> Any:
    raise NotJson(f"{name} is not a JSON value")


def strict_json(text: str | bytes, field: str = "body", *,
                max_depth: int = MAX_JSON_DEPTH) -> Any:
    """JSON text to its value under the rules above: NotJson when it is not JSON at all,
    InvalidInput (naming ``field`` or the part inside it) when it breaks a rule."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except NotJson:
        raise
    except json.JSONDecodeError as exc:
        raise NotJson(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except UnicodeDecodeError:
        raise NotJson("not UTF-8") from None
    except RecursionError:
        raise InvalidInput(field, f"nests deeper than {max_depth} levels") from None
    except ValueError as exc:  # e.g. a number of more digits than Python converts
        raise NotJson(str(exc).split(";", 1)[0]) from None
    check_json_value(value, field, max_depth=max_depth)
    return value
