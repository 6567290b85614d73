"""What requests to the HTTP API may send, as pydantic models: strict (unknown fields and
wrong types are refused). Task environment values and channel secrets are write-only: requests
may set them, no response carries them. (The responses are the service's views,
``qinglong.service.views``; the OpenAPI document is generated from both.)

A request field that the server checks with a pattern or a bound states it in its schema
(``web.field_rules``), so the OpenAPI document tells what the server will refuse.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from qinglong.domain.task import MAX_CONCURRENCY
from qinglong.web import field_rules as r


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Empty(Request):
    """No fields (an empty object, or no body at all)."""


class LoginRequest(Request):
    username: str
    password: str
    otp: str | None = Field(default=None, pattern=r"^[0-9]{6}$",
                            description="The second factor's 6-digit code (a user who has "
                                        "one on: this or recovery_code)")
    recovery_code: str | None = Field(default=None, min_length=1, max_length=64,
                                      description="One unused recovery code, instead of otp")


class LimitsRequest(Request):
    global_: int | None = Field(
        alias="global", ge=1, le=MAX_CONCURRENCY,
        description=f"At most this many Runs executing at once, everywhere (1 to "
                    f"{MAX_CONCURRENCY}); null removes the cap")


class ProjectCreateRequest(Request):
    id: r.ProjectId = Field(description="lowercase letters, digits and '-'")
    name: r.DisplayName | None = None


class PauseRequest(Request):
    until: str | int | None = Field(
        default=None, description="When the pause ends by itself: a duration from now (10m, "
                                  "2h, 1d), RFC 3339 with an offset, or epoch milliseconds; "
                                  "null or left out: until resumed")
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


class ScriptCommandRequest(Request):
    kind: Literal["script"]
    path: str = Field(description="A script of the project (docs/scripts.md); the task pins "
                                  "its current content")
    interpreter: Literal["python3", "node", "bash", "sh"] | None = Field(
        default=None, description="Left out: by the extension (.py, .js/.mjs/.cjs, .sh)")
    args: list[str] = Field(default_factory=list, max_length=256)


class ScriptSaveRequest(Request):
    path: str = Field(description="The script's path in its project, e.g. jd/sign.py")
    content: str = Field(description="UTF-8 text, at most 1 MiB")
    expected_revision: int | None = Field(
        default=None, ge=0, description="Save only if the script is still at this revision "
                                        "(0: only if it is new); left out: whatever it is at")
    keep_tasks: bool = Field(default=False, description="Leave the tasks that run it on the "
                                                        "content they pinned")


class RepoAddRequest(Request):
    name: r.EntityId = Field(description="The subscription's name: its scripts go to the folder NAME/")
    url: str = Field(description="https://, ssh://, git://, file://, user@host:path or a path")
    branch: str = "main"
    include: list[str] | None = Field(default=None, max_length=16, description=(
        "Globs of the files that are scripts (left out: *.py *.js *.mjs *.cjs *.sh)"))
    exclude: list[str] = Field(default_factory=list, max_length=16)
    auto_tasks: bool = Field(default=False, description="Tasks and triggers from the scripts' "
                                                        "cron: header lines")
    schedule: str | None = Field(default=None, description="Pull on this cron schedule "
                                                           "(left out: only when asked)")
    timezone: str = "UTC"
    token_env: r.EnvName | None = Field(default=None, description="An https token: this entry of "
                                                            "the project's environment")
    ssh_key_env: r.EnvName | None = Field(default=None, description="An ssh deploy key: this entry "
                                                              "of the project's environment")


class RetryRequest(Request):
    max_attempts: r.RetryAttempts | None = None
    backoff_ms: r.RetryBackoff | None = None
    max_backoff_ms: r.RetryBackoff | None = None
    on_exit_codes: list[int] | Literal["any"] | None = None
    on_timeout: bool | None = None


class ParameterRequest(Request):
    name: str
    type: Literal["string", "integer", "boolean"] = "string"
    default: str | int | bool


class TaskPublishRequest(Request):
    """What to change; what is left out keeps its current value (a new task needs a
    command). ``working_directory`` and ``concurrency`` set to null clear them."""

    command: Annotated[ShellCommandRequest | ArgvCommandRequest | ScriptCommandRequest,
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
    requires: list[str] | None = Field(
        default=None, max_length=16,
        description="Worker labels a Run needs, KEY or KEY=VALUE (replaces the current ones; "
                    "[] lets any worker run the task; left out: kept)")
    parameters: list[ParameterRequest] | None = Field(
        default=None, max_length=32,
        description="What a run now may give values for, each with its default (replaces the "
                    "current ones; [] removes them; left out: kept; docs/controls/parameters.md)")
    memory_limit_bytes: int | None = Field(
        default=None, description="Most memory a Run's command may use, in bytes (16 MiB to "
                                  "1 TiB; null clears it; docs/controls/limits.md)")
    cpu_limit_s: int | None = Field(
        default=None, description="Most CPU time a Run's command may use, in seconds (1 s to "
                                  "30 days; null clears it)")
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
    flow: r.EntityId | None = Field(
        default=None, description="A new trigger starts a run of this flow at each occurrence "
                                  "instead of a Run of a task (task: one of the flow's, default "
                                  "its first root's); what a trigger starts never changes")
    parameters: dict[str, str | int | bool] | None = Field(
        default=None, max_length=32,
        description="Values for the parameters of its task (or of its flow's tasks), given to "
                    "every Run it admits; replaces the current ones; {} removes them; left "
                    "out: kept (docs/controls/parameters.md)")


class RunNowRequest(Request):
    request_id: r.RequestId | None = Field(
        default=None, description="Client request id (or the Idempotency-Key header): the same "
                                  "id sent again returns the Run it admitted")
    parameters: dict[str, str | int | bool] = Field(
        default_factory=dict, max_length=32,
        description="Values of the task's parameters (the others take their defaults); a "
                    "name the task does not declare or a value of another type is refused "
                    "and nothing is admitted (docs/controls/parameters.md)")


class BackfillRequest(Request):
    from_: str | int = Field(alias="from", description="First instant of the window (included): "
                                                       "RFC 3339 with an offset, or epoch "
                                                       "milliseconds")
    to: str | int = Field(description="Last instant of the window (included), before the "
                                      "trigger's cursor")
    dry_run: bool = Field(default=False, description="Say what would be admitted; write nothing")


class ChannelRequest(Request):
    """A notification channel. ``kind`` webhook needs ``url``; email needs ``smtp_host``,
    ``from`` and ``to``; template needs ``url`` or a ``preset`` (telegram, bark); service
    needs ``service`` (its parameters in ``params``). A field that does not apply to the kind
    is refused. ``secret`` is write-only."""

    name: r.ChannelName = Field(description="1-64 lowercase letters, digits, '-' or '_'")
    kind: Literal["webhook", "email", "template", "service"]
    url: r.ChannelUrl | None = Field(
        default=None, description="webhook: where to POST; template: a URL template with "
                                  "{placeholders}")
    preset: Literal["telegram", "bark"] | None = Field(
        default=None, description="template: a preset for a service instead of url")
    service: Literal["dingtalk", "feishu", "wecom", "serverchan", "pushplus", "ntfy", "gotify",
                     "slack", "discord"] | None = Field(
        default=None, description="service: which one (docs/controls/notifications.md)")
    headers: r.Headers = Field(
        default_factory=list, description="'Name: value' (webhook, template)")
    method: Literal["POST", "PUT", "GET"] | None = Field(default=None,
                                                         description="template (default POST)")
    body_template: dict[str, Any] | list[Any] | None = Field(
        default=None, description="template: the JSON body, placeholders inside strings")
    content_type: str | None = Field(default=None, description="template: the body's media type")
    params: r.Params = Field(
        default_factory=dict, description="template or preset: values for {NAME}; service: "
                                          "server, topic, priority")
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
                                                               "cancelled, misfired, recovered, "
                                                               "unplaceable, started, succeeded, "
                                                               "running_long, late_start or all "
                                                               "(default: failed, timed_out, "
                                                               "lost, misfired, recovered, "
                                                               "unplaceable)")
    unplaceable_after_ms: r.UnplaceableAfter | None = Field(
        default=None, description="Adding a rule with the unplaceable event: how long a queued "
                                  "Run no live worker can take waits before it is reported "
                                  "(default: 5 minutes for a new rule, unchanged for one that "
                                  "asked for it already)")
    running_long_after_ms: r.UnplaceableAfter | None = Field(
        default=None, description="Adding a rule with the running_long event: how long a Run's "
                                  "attempt runs before it is reported (default: 10 minutes for "
                                  "a new rule, unchanged for one that asked for it already)")
    late_start_after_ms: r.UnplaceableAfter | None = Field(
        default=None, description="Adding a rule with the late_start event: how long after its "
                                  "scheduled time a Run not started is reported (default: 5 "
                                  "minutes for a new rule, unchanged for one that asked for it "
                                  "already)")


class TokenCreateRequest(Request):
    name: r.TokenName
    scope: Literal["read", "operate", "admin"]
    expires_in_ms: int | None = Field(default=None, description="Lifetime; null: until revoked")
    username: r.Username | None = Field(default=None, description="Whose token (admins only; default: "
                                                           "yours)")
    projects: list[r.ProjectId] | None = Field(
        default=None, min_length=1, max_length=100,
        description="Limit the token to these projects (each one its user has a role on); it "
                    "then reaches nothing outside them. Null: every project its user may reach")


class UserCreateRequest(Request):
    username: r.Username
    role: Literal["none", "viewer", "operator", "admin"] = Field(
        description="The role on every project; none: only the projects granted to the user")
    password: r.Password


class UserUpdateRequest(Request):
    role: Literal["none", "viewer", "operator", "admin"] | None = None
    password: r.Password | None = None
    disabled: bool | None = None


class GrantRequest(Request):
    role: Literal["viewer", "operator", "admin"] = Field(description="The role on this project")


class FlowNodeRequest(Request):
    task: r.EntityId = Field(description="The task this node runs")
    after: str | list[str] | dict[str, Literal["success", "failure", "always"]] = Field(
        default_factory=list, description="The nodes it comes after: a node id, a list (each on "
                                          "success), or node id -> success, failure or always")
    join: Literal["all", "any"] | None = Field(
        default=None, description="all (default): every edge in must be satisfied; any: one")
    parameters: dict[str, str | int | bool] = Field(
        default_factory=dict, max_length=32, description="Values for the task's parameters")


class FlowPublishRequest(Request):
    name: str | None = Field(default=None, min_length=1, max_length=255,
                             description="Display name (default: the flow id)")
    failure: Literal["stop", "continue"] = Field(
        default="stop", description="After a failed node: stop (follow only failure and "
                                    "always edges) or continue (independent branches finish)")
    timeout: str | None = Field(default=None, description="A duration (30m, 2h): the flow run "
                                                          "fails, cancelling what runs, after it")
    nodes: Annotated[dict[str, r.EntityId | FlowNodeRequest],
                     r.keys_matching(r.ids.ENTITY_ID)] = Field(
        min_length=1, max_length=200, description="Node id -> its task id, or the node")
