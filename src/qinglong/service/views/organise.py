"""The views of what organises tasks and triggers: a task's or trigger's labels, a user's
pins and saved filters (the builders are ``service.labels`` and ``service.pins``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from qinglong.service.views.base import Instant, ViewModel, one_of


class LabelsView(ViewModel):
    project: str
    kind: Annotated[str, one_of("task", "trigger")]
    id: str = Field(description="The task's or trigger's id")
    labels: list[str] = Field(description="Its labels, sorted")


class PinView(ViewModel):
    project: str
    kind: Annotated[str, one_of("task", "trigger")]
    id: str = Field(description="The task's or trigger's id")
    pinned_at: Instant
    pinned_at_ms: int


class SavedFilterView(ViewModel):
    name: str
    page: Annotated[str, one_of("runs", "dashboard", "tasks")] = Field(
        description="The panel page the filter is for")
    query: dict[str, str] = Field(description="The page's query parameters, by name")
    saved_at: Instant
    saved_at_ms: int
