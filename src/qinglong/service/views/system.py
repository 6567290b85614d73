"""The views about the server and its errors: a problem (every error answer), the health of
the processes serving the database, the global limit, liveness, and the events of a followed
log."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from qinglong.service.views.base import Instant, OptionalInstant, ViewModel, one_of


class Problem(ViewModel):
    """RFC 9457 problem details, with our stable error code."""

    type: str
    title: str
    status: int
    code: str
    detail: str
    field: str | None = None
    findings: list[str] | None = None


class InstanceView(ViewModel):
    id: str
    role: str
    host: str
    pid: int
    started_at: Instant
    seen_at: Instant
    stopped_at: OptionalInstant
    alive: bool
    labels: dict[str, str | None] = Field(default_factory=dict,
                                          description="What a worker offers for placement")


class HealthView(ViewModel):
    status: Literal["ok"]
    profile: Annotated[str, one_of("sqlite", "postgresql")]
    version: str
    time: Instant
    instances: list[InstanceView]


class Liveness(ViewModel):
    status: str
    reason: str | None = None


class LogEventData(ViewModel):
    """The data of a ``log`` event of a followed log."""

    text: str


class EndEventData(ViewModel):
    """The data of the ``end`` event: how the Run ended."""

    status: str = Field(description="The Run's status")


class LimitsView(ViewModel):
    global_: int | None = Field(serialization_alias="global",
                                description="At most this many Runs executing at once, "
                                            "everywhere; null: no cap")
