"""The HTTP API's bodies as pydantic models: what requests may send (strict: unknown fields
and wrong types are refused) and what responses carry (the views of ``service.views`` and the
other service modules; the OpenAPI document is generated from these models, and the tests
check every response against it).

Response models allow extra fields: a view that grows a field stays valid for old clients.
Task environment values are write-only: requests may set them, no response carries them.

A request field that the server checks with a pattern or a bound states it in its schema
(``web.field_rules``), so the OpenAPI document tells what the server will refuse.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from qinglong.web import field_rules as r

Instant = Annotated[str, Field(description="RFC 3339 in UTC, e.g. 2026-12-01T08:00:00.000Z")]
OptionalInstant = Annotated[str | None, Field(description="RFC 3339 in UTC, or null")]


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Response(BaseModel):
    model_config = ConfigDict(extra="allow")


# --- requests -----------------------------------------------------------------------------


class Empty(Request):
    """No fields (an empty object, or no body at all)."""


class LoginRequest(Request):
    username: str
    password: str


class ProjectCreateRequest(Request):
    id: r.ProjectId = Field(description="lowercase letters, digits and '-'")
    name: r.DisplayName | None = None


class PauseRequest(Request):
    until: str | int | None = Field(
        default=None, description="When the pause ends by itself: RFC 3339 with an offset, or "
                                  "epoch milliseconds; null or left out: until resumed")
    reason: str | None = Field(default=None, description="Why, kept with the pause")


class ShellCommandRequest(Request):
    kind: Literal["shell"]
    command: str
    shell: Literal["/bin/sh", "/bin/bash"] | None = Field(
        default=None, description="Left out: /bin/sh, or the current interpreter of a shell task")


class ArgvCommandRequest(Request):
    kind: Literal["argv"]
    argv: list[str] = Field(min_length=1, description="An absolute program path, then its "
                                                      "arguments")


class RetryRequest(Request):
    max_attempts: r.RetryAttempts | None = None
    backoff_ms: r.RetryBackoff | None = None
    max_backoff_ms: r.RetryBackoff | None = None
    on_exit_codes: list[int] | Literal["any"] | None = None
    on_timeout: bool | None = None


class TaskPublishRequest(Request):
    """What to change; what is left out keeps its current value (a new task needs a
    command). ``working_directory`` and ``concurrency`` set to null clear them."""

    command: Annotated[ShellCommandRequest | ArgvCommandRequest,
                       Field(discriminator="kind")] | None = None
    name: r.DisplayName | None = None
    environment: dict[str, str] | None = Field(
        default=None, description="Entries to set or replace (write-only: never shown back)")
    unset_environment: list[str] = Field(default_factory=list)
    clear_environment: bool = Field(default=False, description="Start from no entries")
    working_directory: str | None = None
    timeout_ms: r.TaskTimeout | None = None
    retry: RetryRequest | None = None
    idempotent: bool | None = None
    concurrency: r.Concurrency | None = None
    enabled: bool | None = Field(default=None, description="Left out: kept (a new or deleted "
                                                           "task is enabled)")
    repin_triggers: bool = Field(default=True, description="Re-pin the task's triggers to the "
                                                           "new revision")


class TriggerPublishRequest(Request):
    """What to change; what is left out keeps its current value (a new trigger needs task,
    cron and timezone)."""

    task: r.EntityId | None = None
    cron: str | None = Field(default=None, description="A cron expression")
    schedule: str | None = Field(default=None, description="Or any schedule: a cron expression, "
                                                           "every DURATION [from TIME], at TIME")
    timezone: str | None = None
    misfire: Literal["skip", "fire_once"] | None = None
    overlap: Literal["allow", "skip", "queue", "cancel_previous"] | None = None
    overlap_queue_limit: r.QueueLimit | None = None
    dst_gap: Literal["shift", "skip"] | None = Field(
        default=None, description="A wall-clock cron trigger's spring-forward rule: shift the "
                                  "missing local time to after the gap, or skip it")
    dst_overlap: Literal["first", "second", "both"] | None = Field(
        default=None, description="A wall-clock cron trigger's fall-back rule: fire at the first, "
                                  "the second or both of a repeated local time")
    jitter_s: r.JitterSeconds | None = Field(
        default=None, description="Delay each occurrence by up to this many seconds (0-3600; 0: "
                                  "no jitter): a stable offset per trigger plus jitter_random_s")
    jitter_random_s: r.JitterSeconds | None = Field(
        default=None, description="The part of jitter_s drawn anew for each occurrence")
    enabled: bool | None = Field(default=None, description="Left out: kept (a new or deleted "
                                                           "trigger is enabled)")


class RunNowRequest(Request):
    request_id: r.RequestId | None = Field(
        default=None, description="Client request id (or the Idempotency-Key header): the same "
                                  "id sent again returns the Run it admitted")


class BackfillRequest(Request):
    from_: str | int = Field(alias="from", description="First instant of the window (included): "
                                                       "RFC 3339 with an offset, or epoch "
                                                       "milliseconds")
    to: str | int = Field(description="Last instant of the window (included), before the "
                                      "trigger's cursor")
    dry_run: bool = Field(default=False, description="Say what would be admitted; write nothing")


class ChannelRequest(Request):
    """A notification channel. ``kind`` webhook needs ``url``; email needs ``smtp_host``,
    ``from`` and ``to``; template needs ``url`` or a ``preset`` (telegram, bark). A field
    that does not apply to the kind is refused. ``secret`` is write-only."""

    name: r.ChannelName = Field(description="1-64 lowercase letters, digits, '-' or '_'")
    kind: Literal["webhook", "email", "template"]
    url: r.ChannelUrl | None = Field(
        default=None, description="webhook: where to POST; template: a URL template with "
                                  "{placeholders}")
    preset: Literal["telegram", "bark"] | None = Field(
        default=None, description="template: a preset for a service instead of url")
    headers: r.Headers = Field(
        default_factory=list, description="'Name: value' (webhook, template)")
    method: Literal["POST", "PUT", "GET"] | None = Field(default=None,
                                                         description="template (default POST)")
    body_template: dict[str, Any] | list[Any] | None = Field(
        default=None, description="template: the JSON body, placeholders inside strings")
    content_type: str | None = Field(default=None, description="template: the body's media type")
    params: r.Params = Field(
        default_factory=dict, description="template or preset: values for {NAME}")
    smtp_host: str | None = None
    smtp_port: r.Port | None = None
    smtp_security: Literal["starttls", "tls", "none"] | None = None
    smtp_user: str | None = Field(default=None, description="email: log in (password: secret)")
    from_: str | None = Field(default=None, alias="from", description="email: the sender")
    to: r.Recipients = Field(
        default_factory=list, description="email: the recipients")
    secret: r.ChannelSecret | None = Field(
        default=None, description="The HMAC key, SMTP password, bot token "
                                                         "or device key (write-only: never shown "
                                                         "back)")
    drop_secret: bool = Field(default=False, description="With replace: erase the stored secret")
    timeout_ms: r.ChannelTimeout | None = Field(default=None,
                                                description="Per network operation")
    max_attempts: r.ChannelAttempts | None = Field(default=None, description="Attempts before "
                                                                            "a delivery is dead")
    retry_backoff_ms: r.ChannelBackoff | None = None
    retry_max_backoff_ms: r.ChannelBackoff | None = None
    replace: bool = Field(default=False, description="Change an existing channel (its secret "
                                                     "stays unless a new one is given)")


class RuleRequest(Request):
    channel: r.ChannelName
    project: r.ProjectId
    task: r.EntityId | None = Field(default=None, description="Only this task (default: every task)")
    events: list[str] | None = Field(default=None, description="failed, timed_out, lost, "
                                                               "cancelled, misfired, recovered "
                                                               "or all (default: all but "
                                                               "cancelled)")


class TokenCreateRequest(Request):
    name: r.TokenName
    scope: Literal["read", "operate", "admin"]
    expires_in_ms: int | None = Field(default=None, description="Lifetime; null: until revoked")
    username: r.Username | None = Field(default=None, description="Whose token (admins only; default: "
                                                           "yours)")


class UserCreateRequest(Request):
    username: r.Username
    role: Literal["viewer", "operator", "admin"]
    password: str


class UserUpdateRequest(Request):
    role: Literal["viewer", "operator", "admin"] | None = None
    password: str | None = None
    disabled: bool | None = None


# --- responses: definitions ------------------------------------------------------------------


class Problem(Response):
    """RFC 9457 problem details, with our stable error code."""

    type: str
    title: str
    status: int
    code: str
    detail: str
    field: str | None = None
    findings: list[str] | None = None


class ProjectView(Response):
    id: str
    name: str
    status: Literal["active", "archived"]
    version: int
    created_at: Instant
    updated_at: Instant


class CommandView(Response):
    kind: Literal["argv", "shell"]
    argv: list[str] | None = None
    shell: str | None = None
    command: str | None = None


class RetryView(Response):
    max_attempts: int
    backoff_ms: int
    max_backoff_ms: int
    on_exit_codes: list[int] | Literal["any"]
    on_timeout: bool


class TaskRevisionView(Response):
    project: str
    task: str
    revision: int
    name: str
    enabled: bool
    command: CommandView
    environment: list[str] = Field(description="Names only: values are write-only")
    working_directory: str | None
    timeout_ms: int
    retry: RetryView
    idempotent: bool
    concurrency: int | None
    content_digest: str
    published_at: Instant
    published_at_ms: int


class TaskView(TaskRevisionView):
    deleted: bool
    deleted_at: OptionalInstant


class Change(Response):
    field: str
    from_: Any = Field(alias="from")
    to: Any


class TaskHistoryEntry(TaskRevisionView):
    changes: list[Change]


class TaskShowView(TaskView):
    history: list[TaskHistoryEntry]


class TaskPublishView(TaskRevisionView):
    created: bool
    restored: bool
    repinned_triggers: list[str]


class TaskDiffView(Response):
    project: str
    task: str
    from_: int = Field(alias="from")
    to: int
    changes: list[Change]


class TriggerRevisionView(Response):
    project: str
    trigger: str
    revision: int
    task: str
    task_revision: int
    task_content_digest: str
    kind: Literal["cron", "interval", "once"] | None = None
    schedule: str | None = Field(default=None, description="The schedule's canonical text")
    cron: str | None = Field(description="The cron expression (null for other kinds)")
    timezone: str
    misfire: str
    overlap: str
    overlap_queue_limit: int
    enabled: bool
    content_digest: str
    published_at: Instant
    published_at_ms: int


class TriggerPublishView(TriggerRevisionView):
    created: bool
    restored: bool


class PauseView(Response):
    since: Instant
    since_ms: int
    until: OptionalInstant
    until_ms: int | None
    reason: str | None


class TriggerView(TriggerRevisionView):
    state: str = Field(description="firing, paused, disabled, stale-pin, archived, deleted or "
                                   "done")
    pause: PauseView | None
    deleted_at: OptionalInstant
    next_fire_at: list[str]
    next_fire_at_ms: list[int]
    next_fire_local: list[str] = Field(description="The same instants in the trigger's zone")
    cursor_ms: int | None
    last_scheduled_at: OptionalInstant


class PreviewOccurrence(Response):
    n: int
    local: str
    utc: Instant
    at_ms: int
    dst: Literal["gap-shifted", "overlap-first", "overlap-second"] | None
    note: str


class PreviewView(Response):
    kind: Literal["cron", "interval", "once"]
    schedule: str
    cron: str | None
    timezone: str
    occurrences: list[PreviewOccurrence]


class LedgerRun(Response):
    id: str
    status: str
    type: str


class LedgerOccurrence(Response):
    at: Instant
    at_ms: int
    local: str
    revision: int
    fate: Literal["ran", "duplicate", "skipped", "paused", "archived", "due", "pending",
                  "superseded", "missing"]
    runs: list[LedgerRun]


class LedgerView(Response):
    project: str
    trigger: str
    from_: Instant = Field(alias="from")
    from_ms: int
    to: Instant
    to_ms: int
    occurrences: list[LedgerOccurrence]
    not_shown: int
    counts: dict[str, int]


# --- responses: Runs ------------------------------------------------------------------------


class RunView(Response):
    id: str
    project: str
    task: str
    task_name: str | None
    task_revision: str
    trigger: str | None
    trigger_revision: int | None
    trigger_type: str
    origin: str
    triggered_by: str | None
    requested_by: str | None
    request_id: str | None
    scheduled_for: OptionalInstant
    scheduled_for_ms: int | None
    status: str
    version: int
    idempotency_key: str | None
    created_at: Instant
    created_at_ms: int
    admission_lag_ms: int | None
    started_at: OptionalInstant
    finished_at: OptionalInstant
    duration_ms: int | None
    exit_code: int | None
    error_code: str | None
    error_summary: str | None
    cancel_reason: str | None


class RunPageView(Response):
    items: list[RunView]
    next_cursor: str | None = Field(description="Send it as ?cursor= with the same filters for "
                                                "the next page; null: no more")


class AttemptView(Response):
    id: str
    attempt: int
    status: str
    executor_type: str
    worker: str | None
    lease_generation: int
    lease_expires_at: OptionalInstant
    pid: int | None
    exit_code: int | None
    started_at: OptionalInstant
    finished_at: OptionalInstant
    log_path: str | None
    error_code: str | None
    error_summary: str | None


class EventView(Response):
    sequence: int
    type: str
    summary: str
    actor: str
    attempt_id: str | None
    payload: dict[str, Any]
    at: Instant
    at_ms: int


class LogLocation(Response):
    path: str | None
    readable: bool
    stored: Literal["file", "database"] | None
    note: str | None


class RunDetailView(Response):
    run: RunView
    attempts: list[AttemptView]
    events: list[EventView]
    log: LogLocation
    log_tail: list[str]


class RunCancelView(RunView):
    cancel: Literal["done", "requested"]


class RunNowView(RunView):
    admitted: bool = Field(description="False: the request id had admitted this Run before")
    in_doubt: bool


# --- responses: stats and health -------------------------------------------------------------


class DayCounts(Response):
    task: str
    runs: int
    successes: int
    failures: int = Field(description="failed, timed out or lost")
    cancelled: int = Field(description="cancelled, except by an overlap policy")
    skipped: int = Field(description="ended by the trigger's overlap policy (skip, a full "
                                     "queue, cancel_previous): neither success nor failure")
    success_rate: float | None = Field(description="successes / (successes + failures + "
                                                   "cancelled); null when that is 0")
    total_duration_ms: int
    max_duration_ms: int | None


class DayRow(DayCounts):
    date: str


class StatsView(Response):
    project: str
    task: str | None
    timezone: str
    from_: str = Field(alias="from")
    to: str
    days: list[DayRow]
    totals: list[DayCounts]


class InstanceView(Response):
    id: str
    role: str
    host: str
    pid: int
    started_at: Instant
    seen_at: Instant
    stopped_at: OptionalInstant
    alive: bool


class HealthView(Response):
    status: Literal["ok"]
    profile: Literal["sqlite", "postgresql"]
    version: str
    time: Instant
    instances: list[InstanceView]


class Liveness(Response):
    status: str
    reason: str | None = None


# --- responses: accounts ----------------------------------------------------------------------


class PrincipalView(Response):
    username: str
    role: Literal["viewer", "operator", "admin"]
    via: Literal["session", "token", "cli"]
    token_id: str | None
    scope: Literal["read", "operate", "admin"]
    expires_at: OptionalInstant


class SessionView(PrincipalView):
    csrf_token: str = Field(description="Send it as X-CSRF-Token with every write of this "
                                        "session")


class UserView(Response):
    username: str
    role: Literal["viewer", "operator", "admin"]
    disabled: bool
    created_at: Instant
    updated_at: Instant
    disabled_at: OptionalInstant


class TokenView(Response):
    id: str
    name: str
    username: str
    scope: Literal["read", "operate", "admin"]
    state: Literal["active", "expired", "revoked"]
    created_at: Instant
    expires_at: OptionalInstant
    last_used_at: OptionalInstant
    revoked_at: OptionalInstant
    revoked_by: str | None


class TokenCreatedView(TokenView):
    token: str = Field(description="The token itself: shown this once, stored only as a digest")


class AuditEntryView(Response):
    id: int
    at: Instant
    at_ms: int
    actor: str
    via: Literal["session", "token", "cli"]
    token_id: str | None
    action: str
    project: str | None
    target: str | None
    detail: dict[str, Any]
    client: str | None


class AuditPageView(Response):
    items: list[AuditEntryView]
    next_cursor: str | None


# --- responses: backfill and notifications ---------------------------------------------------


class BackfilledRun(Response):
    scheduled_for: Instant
    scheduled_for_ms: int
    run_id: str


class BackfillView(Response):
    project: str
    trigger: str
    trigger_revision: int
    kind: str
    schedule: str
    cron: str | None
    timezone: str
    from_: Instant = Field(alias="from")
    from_ms: int
    to: Instant
    to_ms: int
    horizon: OptionalInstant
    horizon_ms: int | None
    actor: str
    occurrences: int
    already_had_run: int
    dry_run: bool
    to_admit: int | None = Field(default=None, description="Dry run: how many would be admitted")
    to_admit_ms: list[int] | None = Field(default=None, description="Dry run: their instants")
    state: Literal["done", "interrupted", "failed"] | None = Field(
        default=None, description="interrupted: the server stopped; failed: see error")
    rate: float | None = Field(default=None, description="Admissions per second at most")
    admitted: int | None = None
    skipped: int | None = Field(default=None, description="Not reached: the backfill stopped "
                                                          "first (send it again to carry on)")
    in_doubt: int | None = None
    next: OptionalInstant = None
    next_ms: int | None = None
    elapsed_ms: int | None = None
    runs: list[BackfilledRun] | None = None
    error: Problem | None = Field(default=None, description="Why a backfill that had admitted "
                                                            "Runs stopped")


class RuleView(Response):
    channel: str
    project: str
    task: str | None
    events: list[str]
    created_at: Instant
    created_at_ms: int


class ChannelRetryView(Response):
    max_attempts: int
    backoff_ms: int
    max_backoff_ms: int


class ChannelView(Response):
    name: str
    kind: Literal["webhook", "email", "template"]
    target: str
    secret: Literal["set", "not set"] = Field(description="Whether a secret is stored (never "
                                                          "its value)")
    timeout_ms: int
    retry: ChannelRetryView
    version: int
    created_at: Instant
    updated_at: Instant
    rules: list[RuleView] | None = None
    removed: bool | None = None


class RuleRemovedView(Response):
    removed: int = Field(description="How many (channel, project, task, event) rows")


class NotifyTestView(Response):
    channel: str
    id: str
    event: str
    delivered: bool
    status: int | None
    detail: str
    elapsed_ms: int


class DeliveryView(Response):
    id: str
    channel: str
    event: str
    status: Literal["pending", "sending", "delivered", "dead"]
    attempts: int
    max_attempts: int
    next_attempt_at: OptionalInstant
    next_attempt_at_ms: int | None
    last_status: int | None
    last_error: str | None
    project: str
    task: str | None
    trigger: str | None
    run: str | None
    source: str
    occurred_at: Instant
    occurred_at_ms: int
    created_at: Instant
    created_at_ms: int
    finished_at: OptionalInstant
    finished_at_ms: int | None


class LogEventData(Response):
    """The data of a ``log`` event of a followed log."""

    text: str


class EndEventData(Response):
    """The data of the ``end`` event: how the Run ended."""

    status: str


RESPONSE_MODELS: tuple[type[BaseModel], ...] = (
    Problem, ProjectView, TaskView, TaskShowView, TaskPublishView, TaskDiffView, TriggerView,
    TriggerPublishView, PreviewView, LedgerView, RunPageView, RunDetailView, RunCancelView,
    RunNowView, StatsView, HealthView, Liveness, PrincipalView, SessionView, UserView,
    TokenView, TokenCreatedView, AuditPageView, BackfillView, ChannelView, RuleView,
    RuleRemovedView, NotifyTestView, DeliveryView, LogEventData, EndEventData,
)
