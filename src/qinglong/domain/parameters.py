"""Task parameters (issue 21, item 3; docs/controls/parameters.md): a task declares typed
parameters, each with a default; a run now may give other values, checked before anything is
admitted; every Run records the values it runs with, and its command gets each one as an
environment variable of the parameter's name (and, in an argv task's arguments, in place of
``{{NAME}}``).

Every parameter has a default, so a trigger's scheduled Runs always have their values; a
trigger may give its own (``TriggerSpec.parameters``), checked against the task it pins
whenever it is published or re-pinned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from qinglong.errors import InvalidInput

PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
RESERVED_PREFIX = "QL_"
MAX_PARAMETERS = 32
MAX_VALUE_BYTES = 4096
NAME_RULE = ("must be 1-64 letters, digits and '_', not starting with a digit or with QL_ "
             "(it becomes an environment variable)")

Value = str | int | bool


class ParamType(StrEnum):
    STRING = "string"
    INTEGER = "integer"
    BOOLEAN = "boolean"

    @classmethod
    def parse(cls, text: object, field: str = "parameters") -> ParamType:
        aliases = {"str": "string", "int": "integer", "bool": "boolean"}
        key = aliases.get(str(text), str(text))
        try:
            return cls(key)
        except ValueError:
            raise InvalidInput(field, f"type {text!r} must be string, integer or boolean") \
                from None


def _name(name: object, field: str) -> str:
    if not isinstance(name, str) or not PARAM_NAME.fullmatch(name) or \
            name.upper().startswith(RESERVED_PREFIX):
        raise InvalidInput(field, f"{name!r}: {NAME_RULE}")
    return name


def coerce(kind: ParamType, value: object, field: str) -> Value:
    """``value`` as a value of ``kind``: the JSON value itself, or text as a command line or a
    form gives it (``3``, ``true``/``false``); anything else is refused."""
    if kind is ParamType.BOOLEAN:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise InvalidInput(field, f"{value!r} is not true or false")
    if kind is ParamType.INTEGER:
        if isinstance(value, int) and not isinstance(value, bool):
            found = value
        elif isinstance(value, str) and re.fullmatch(r"\s*-?\d{1,16}\s*", value):
            found = int(value)
        else:
            raise InvalidInput(field, f"{value!r} is not an integer")
        if abs(found) > 2**53 - 1:
            raise InvalidInput(field, "is out of range")
        return found
    if not isinstance(value, str) or "\x00" in value:
        raise InvalidInput(field, f"{value!r} is not text")
    if len(value.encode("utf-8")) > MAX_VALUE_BYTES:
        raise InvalidInput(field, f"must be at most {MAX_VALUE_BYTES} bytes")
    return value


def text(value: object) -> str:
    """A value as the command sees it: text, a decimal integer, ``true`` or ``false``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Parameter:
    name: str
    type: ParamType
    default: Value

    def __post_init__(self) -> None:
        _name(self.name, "parameters")
        if not isinstance(self.type, ParamType):
            raise InvalidInput("parameters", "type must be string, integer or boolean")
        object.__setattr__(self, "default", coerce(self.type, self.default,
                                                   f"parameters.{self.name}.default"))

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "type": self.type.value, "default": self.default}


def parse_declaration(text_: str, field: str = "--param") -> Parameter:
    """``NAME=DEFAULT`` (text), ``NAME:int=3``, ``NAME:bool=false``."""
    head, found, default = text_.partition("=")
    if not found:
        raise InvalidInput(field, f"{text_!r} must be NAME[:TYPE]=DEFAULT (every parameter has "
                                  "a default)")
    name, _, kind = head.partition(":")
    return Parameter(name=_name(name.strip(), field),
                     type=ParamType.parse(kind.strip() or "string", field), default=default)


def check_parameters(items: Iterable[Parameter], field: str = "parameters") -> \
        tuple[Parameter, ...]:
    """A task's parameters in canonical order (by name), each name once."""
    found = sorted(items, key=lambda p: p.name)
    names = [p.name for p in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InvalidInput(field, f"{twice[0]!r} is declared more than once")
    if len(found) > MAX_PARAMETERS:
        raise InvalidInput(field, f"at most {MAX_PARAMETERS} parameters")
    return tuple(found)


def parse_stored(value: object) -> tuple[Parameter, ...]:
    """Stored parameters: a non-empty list in canonical order (left out when none)."""
    if not isinstance(value, list) or not value:
        raise InvalidInput("parameters", "must be a non-empty list (left out when none)")
    items = []
    for item in value:
        if not isinstance(item, Mapping) or set(item) != {"name", "type", "default"}:
            raise InvalidInput("parameters", "each must have exactly name, type and default")
        items.append(Parameter(name=item["name"], type=ParamType.parse(item["type"]),
                               default=item["default"]))
    found = check_parameters(items)
    if [p.name for p in found] != [p.name for p in items]:
        raise InvalidInput("parameters", "is not in canonical form (sorted by name)")
    return found


def resolve(declared: Iterable[Parameter], given: Mapping[str, object],
            field: str = "parameters") -> dict[str, Value]:
    """Every declared parameter's value for one Run: the one given, or its default. A value
    for an undeclared name, or of the wrong type, is refused."""
    by_name = {p.name: p for p in declared}
    unknown = sorted(set(given) - set(by_name))
    if unknown:
        known = ", ".join(sorted(by_name)) or "none"
        raise InvalidInput(field, f"the task has no parameter {unknown[0]!r} (it has: {known})")
    return {name: coerce(p.type, given[name], f"{field}.{name}") if name in given else p.default
            for name, p in sorted(by_name.items())}


def parse_values(items: Iterable[str], field: str = "--param") -> dict[str, str]:
    """``NAME=VALUE`` items of a run now's command line (converted by type at admission)."""
    values: dict[str, str] = {}
    for item in items:
        name, found, value = item.partition("=")
        if not found:
            raise InvalidInput(field, f"{item!r} must be NAME=VALUE")
        if name in values:
            raise InvalidInput(field, f"{name!r} is given more than once")
        values[_name(name, field)] = value
    return values


def values_json(values: Mapping[str, Value]) -> str | None:
    """A Run's values as stored (None: the task has no parameters)."""
    if not values:
        return None
    return json.dumps(dict(sorted(values.items())), separators=(",", ":"), ensure_ascii=False)


PLACEHOLDER = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]{0,63})\}\}")


def substitute(args: Iterable[str], values: Mapping[str, Value]) -> list[str]:
    """An argv task's arguments with each ``{{NAME}}`` of a parameter replaced by its value
    (other braces are left alone). Each argument stays one argument: no shell reads it."""
    return [PLACEHOLDER.sub(lambda m: text(values[m.group(1)]) if m.group(1) in values
                            else m.group(0), arg) for arg in args]


def parameters_change(given: Iterable[str], clear: bool,
                      field: str = "--param") -> tuple[Parameter, ...] | None:
    """What a publish does to a task's parameters: replace them with ``given`` (each
    ``NAME[:TYPE]=DEFAULT``), clear them (``()``) or keep them (None)."""
    items = list(given)
    if clear and items:
        raise InvalidInput(field, "give parameters or --no-params, not both")
    if clear:
        return ()
    if not items:
        return None
    return check_parameters((parse_declaration(item, field) for item in items), field)


def trigger_values(given: Mapping[str, object],
                   field: str = "parameters") -> tuple[tuple[str, Value], ...]:
    """Parameter values as a trigger keeps them: by name, each a string, an integer or a
    boolean (checked against the declarations of what it runs when it is published)."""
    if not isinstance(given, Mapping):
        raise InvalidInput(field, "must be an object of parameter names to values")
    if len(given) > MAX_PARAMETERS:
        raise InvalidInput(field, f"at most {MAX_PARAMETERS} values")
    items = []
    for name, value in sorted(given.items()):
        _name(name, field)
        if not isinstance(value, str | int | bool):
            raise InvalidInput(f"{field}.{name}", "must be a string, an integer or a boolean")
        items.append((name, value))
    return tuple(items)
