"""The patterns and bounds that request fields are checked with, as JSON Schema keywords for
the OpenAPI document: each is taken from the definition its check uses (the domain's
patterns and limits), so the document states what the server will refuse and there is no
second copy to drift. ``Rule`` only states; the checks stay where they are."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from qinglong.domain import identifiers as ids
from qinglong.domain import jitter, retry, task, trigger
from qinglong.domain.manual import REQUEST_ID
from qinglong.domain.notify import channels, events, urls
from qinglong.domain.task_env import ENV_NAME
from qinglong.domain.text import CONTROL
from qinglong.service import accounts, passwords

# Text without the control characters the server refuses in it (domain.text.CONTROL).
NO_CONTROLS = "^[^" + CONTROL.pattern[1:-1].encode("unicode_escape").decode() + "]*$"


@dataclass(frozen=True, slots=True)
class Rule:
    """JSON Schema keywords a field's check enforces (stated, not checked, here)."""

    keywords: tuple[tuple[str, object], ...]

    def __get_pydantic_json_schema__(self, core_schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        schema = handler(core_schema)
        schema.update(self.keywords)
        return schema


def matching(pattern: re.Pattern[str]) -> Rule:
    return Rule((("pattern", pattern.pattern),))


def between(low: int, high: int) -> Rule:
    return Rule((("minimum", low), ("maximum", high)))


def length(low: int, high: int) -> Rule:
    return Rule((("minLength", low), ("maxLength", high)))


def keys_matching(pattern: re.Pattern[str]) -> Rule:
    """An object whose every key matches ``pattern``."""
    return Rule((("propertyNames", {"pattern": pattern.pattern}),))


ProjectId = Annotated[str, matching(ids.PROJECT_ID)]
EntityId = Annotated[str, matching(ids.ENTITY_ID)]
DisplayName = Annotated[str, matching(ids.DISPLAY_NAME)]
RequestId = Annotated[str, matching(REQUEST_ID)]
Username = Annotated[str, matching(accounts.USERNAME)]
TokenName = Annotated[str, length(1, accounts.TOKEN_NAME_MAX), Rule((("pattern", NO_CONTROLS),))]
Password = Annotated[str, length(passwords.MIN_PASSWORD, passwords.MAX_PASSWORD)]
EnvName = Annotated[str, matching(ENV_NAME)]

TaskTimeout = Annotated[int, between(task.MIN_TIMEOUT_MS, task.MAX_TIMEOUT_MS)]
Concurrency = Annotated[int, between(1, task.MAX_CONCURRENCY)]
RetryAttempts = Annotated[int, between(1, retry.MAX_ATTEMPTS)]
RetryBackoff = Annotated[int, between(retry.MIN_BACKOFF_MS, retry.MAX_BACKOFF_MS)]
QueueLimit = Annotated[int, between(0, trigger.MAX_QUEUE_LIMIT)]
JitterSeconds = Annotated[int, between(0, jitter.MAX_JITTER_S)]

ChannelName = Annotated[str, matching(channels.NAME)]
ChannelUrl = Annotated[str, length(1, urls.MAX_URL)]
ChannelSecret = Annotated[str, length(1, channels.MAX_SECRET)]
ChannelTimeout = Annotated[int, between(channels.MIN_TIMEOUT_MS, channels.MAX_TIMEOUT_MS)]
ChannelAttempts = Annotated[int, between(channels.MIN_ATTEMPTS, channels.MAX_ATTEMPTS)]
ChannelBackoff = Annotated[int, between(channels.MIN_BACKOFF_MS, channels.MAX_BACKOFF_MS)]
UnplaceableAfter = Annotated[int, between(events.MIN_UNPLACEABLE_AFTER_MS,
                                          events.MAX_UNPLACEABLE_AFTER_MS)]
Port = Annotated[int, between(1, channels.MAX_PORT)]
Headers = Annotated[list[str], Rule((("maxItems", channels.MAX_HEADERS),))]
Recipients = Annotated[list[str], Rule((("maxItems", channels.MAX_RECIPIENTS),))]
Params = Annotated[dict[str, str], Rule((("maxProperties", channels.MAX_PARAMS),))]
