"""What the organising routes take (labels, pins' none, saved filters), as strict request
models stating the rules their checks use (``domain.organise``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from qinglong.domain.organise import (
    FILTER_KEY,
    FILTER_VALUE_MAX,
    LABEL,
    MAX_FILTER_KEYS,
    MAX_LABELS,
)
from qinglong.web import field_rules as r
from qinglong.web.requests import Request

Label = Annotated[str, r.matching(LABEL)]
FilterValue = Annotated[str, r.length(0, FILTER_VALUE_MAX),
                        r.Rule((("pattern", r"^[^\x00-\x1f\x7f]*$"),))]
FilterQuery = Annotated[dict[str, FilterValue],
                        r.Rule((("propertyNames", {"pattern": FILTER_KEY.pattern}),))]


class LabelsRequest(Request):
    labels: list[Label] = Field(max_length=MAX_LABELS, description=(
        "The whole set of labels (an empty list clears them), e.g. [\"team:payments\", "
        "\"nightly\"]"))


class SavedFilterRequest(Request):
    page: Literal["runs", "dashboard", "tasks"] = Field(
        description="The panel page the filter is for")
    query: FilterQuery = Field(
        max_length=MAX_FILTER_KEYS, description="The page's query parameters, by name "
                                                "(e.g. {\"status\": \"failed\"})")
