"""What every view is: a pydantic model whose JSON form is what the surfaces print
(``--json``) and serve (the HTTP API), and from which the OpenAPI document is generated.

A view lists each field it always carries without a default; a field that only some views
carry (a cron trigger's ``dst``, an interval's ``every_s``) has the default None and is left
out of the JSON form unless it was given (``exclude_unset``), so a key is present exactly when
the builder set it. Views allow extra fields in their schema: a view that grows a field stays
valid for old clients. A field named after a Python keyword is spelled with a trailing
underscore and serialized under its JSON name (``from_`` -> ``from``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.fields import FieldInfo

from qinglong.service.times import rfc3339

Instant = Annotated[str, Field(description="RFC 3339 in UTC, e.g. 2026-12-01T08:00:00.000Z")]
OptionalInstant = Annotated[str | None, Field(description="RFC 3339 in UTC, or null")]

V = TypeVar("V", bound="ViewModel")


def one_of(*values: str | None) -> FieldInfo:
    """The values a text field can have, stated in its schema (``Annotated[str, one_of(...)]``;
    None among them for a nullable one). Its builder passes the domain's value as it is."""
    found: FieldInfo = Field(json_schema_extra={"enum": list(values)})
    return found


def instant(ms: int) -> str:
    """An instant that is always there, as RFC 3339 in UTC."""
    text = rfc3339(ms)
    assert text is not None
    return text


class ViewModel(BaseModel):
    model_config = ConfigDict(extra="allow")

    def to_json(self) -> dict[str, Any]:
        """The JSON form: the fields that were set, by their JSON names."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def extended(self, cls: type[V], **more: object) -> V:
        """This view as ``cls`` (a view that extends this one's class) with ``more``."""
        given = {name: getattr(self, name) for name in self.model_fields_set}
        return cls(**given, **more)


def jsonable(value: object) -> object:
    """``value`` with every view in it (also inside lists and dicts) as its JSON form."""
    if isinstance(value, ViewModel):
        return value.to_json()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, Mapping):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [jsonable(item) for item in value]
    return value
