"""Notifications: what `ql notify` and the HTTP API's /api/v1/notify routes both do, written
once over the notify store: channels (saved with their secret, which is never read back),
the rules that attach them to projects and tasks, a test send, and the outbox of deliveries.

The surfaces parse their input into the notification model (``domain/notify``) and render
what comes back (the views of ``service/views/notify.py``); the rules about secrets live here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum

from qinglong.clock import Clock
from qinglong.domain.notify import payload as documents
from qinglong.domain.notify.channels import ChannelSpec, check_secret, missing_secret
from qinglong.domain.notify.events import DEFAULT_EVENTS, RuleEvent, delays_given
from qinglong.domain.notify.model import Channel, Delivery, DeliveryStatus, Rule
from qinglong.domain.notify.services import ServiceTarget
from qinglong.domain.notify.services import check_secret as check_service_secret
from qinglong.errors import InvalidInput, NotFound, RecordCorrupt
from qinglong.ids import new_uuid
from qinglong.storage.notify import NotifyStore
from qinglong.storage.notify.params import (
    MAX_LIST,
    ChannelPutParams,
    DeliveryListParams,
    RuleAddParams,
    RuleRemoveParams,
)

__all__ = ["MAX_LIST", "ChannelRules", "Notifications", "SavedChannel", "SecretChange",
           "SentTest", "naming"]


@contextlib.contextmanager
def naming(names: Mapping[str, str]) -> Iterator[None]:
    """Errors about a field of the notification model name what set it on the surface: the
    CLI's option (``--smtp-host``), the API's request field (``smtp_host``). A field not in
    ``names``, or named the same there, keeps its error as it is."""
    try:
        yield
    except InvalidInput as exc:
        name = names.get(exc.field)
        if name is None or name == exc.field:
            raise
        raise InvalidInput(name, exc.rule) from None


class SecretChange(StrEnum):
    """What saving a channel did to its secret."""

    SET = "set"  # a new one was given
    ERASED = "erased"  # dropped on purpose
    KEPT = "kept"  # the stored one stays
    NONE = "none"  # there was none and none was given


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelRules:
    channel: Channel
    rules: list[Rule]


@dataclass(frozen=True, slots=True, kw_only=True)
class SavedChannel:
    channel: Channel
    replaced: bool  # a channel of that name existed and was changed
    secret: SecretChange


@dataclass(frozen=True, slots=True, kw_only=True)
class SentTest:
    """A test notification sent now (event notify.test, not through the outbox)."""

    channel: str
    id: str  # the document's delivery id
    event: str
    delivered: bool
    status: int | None  # the HTTP status or the SMTP reply code, when one came back
    detail: str  # one line for people; never the secret
    elapsed_ms: int


class Notifications:
    def __init__(self, store: NotifyStore, clock: Clock, *,
                 new_id: Callable[[], str] = new_uuid) -> None:
        self._store = store
        self._clock = clock
        self._new_id = new_id

    # -- channels -----------------------------------------------------------------------

    def channels(self) -> list[ChannelRules]:
        """Every channel with its rules."""
        rules = self._store.rule_list()
        return [ChannelRules(channel=item, rules=[r for r in rules if r.channel == item.name])
                for item in self._store.channel_list()]

    def channel(self, name: str) -> ChannelRules:
        item = self._store.channel_get(name)
        return ChannelRules(channel=item, rules=self._store.rule_list(channel=name))

    def save_channel(self, spec: ChannelSpec, secret: str | None, *, replace: bool = False,
                     drop_secret: bool = False, smtp_user_field: str = "smtp_user") -> SavedChannel:
        """Add the channel ``spec`` names, or with ``replace`` change it. Its secret is
        ``secret`` when one is given, else the stored one stays (unless ``drop_secret``); a
        target that cannot work without a secret is refused without one (InvalidInput on
        ``secret``; ``smtp_user_field`` is how the caller names the SMTP user)."""
        check_secret(secret)
        if secret is not None and isinstance(spec.target, ServiceTarget):
            check_service_secret(spec.target.service, secret)
        if drop_secret and (secret is not None or not replace):
            raise InvalidInput("drop_secret", "goes with replace, without a new secret")
        replaced = kept = False
        if replace:
            try:
                kept = self._store.channel_get(spec.name).secret_set and not drop_secret
                replaced = True
            except NotFound:
                pass
            except RecordCorrupt:  # a row this version cannot read: replacing it repairs it
                replaced = True
        missing = missing_secret(spec.target, smtp_user_field)
        if missing and secret is None and not kept:
            raise InvalidInput("secret", missing)
        item = self._store.channel_put(ChannelPutParams(spec=spec, secret=secret,
                                                        keep_secret=not drop_secret,
                                                        replace=replace))
        change = (SecretChange.SET if secret is not None else SecretChange.ERASED if drop_secret
                  else SecretChange.KEPT if kept else SecretChange.NONE)
        return SavedChannel(channel=item, replaced=replaced, secret=change)

    def remove_channel(self, name: str) -> Channel:
        """Remove channel ``name`` and its rules; its secret is erased, and deliveries still
        waiting for it end dead."""
        return self._store.channel_remove(name)

    def send_test(self, name: str) -> SentTest:
        """Send a test notification to channel ``name`` now, bounded by its timeout."""
        spec, secret = self._store.channel_for_send(name)
        document = documents.build(documents.probe_event(self._clock.now_ms()),
                                   delivery_id=self._new_id(), channel=name)
        from qinglong.notify.senders import Sender  # smtplib, ssl and http.client load on use

        result = Sender(self._clock).send(spec, secret, document)
        return SentTest(channel=name, id=document["id"], event=document["event"],
                        delivered=result.ok, status=result.status, detail=result.detail,
                        elapsed_ms=result.elapsed_ms)

    # -- rules --------------------------------------------------------------------------

    def add_rule(self, channel: str, project_id: str, task_id: str | None,
                 events: tuple[RuleEvent, ...] = DEFAULT_EVENTS,
                 unplaceable_after_ms: int | None = None, *,
                 running_long_after_ms: int | None = None,
                 late_start_after_ms: int | None = None) -> list[Rule]:
        """Tell ``channel`` about ``events`` of a project, or of one of its tasks (None: every
        task); the rules of that target as they now stand. The delays go with their events
        only (InvalidInput on ``unplaceable_after`` ... otherwise): ``unplaceable_after_ms``,
        how long a queued Run no live worker can take waits before it is reported;
        ``running_long_after_ms``, how long a Run runs before it is reported;
        ``late_start_after_ms``, how long after its scheduled time a Run not started is
        reported. None: the default for a new rule, unchanged for one that asked already."""
        given = delays_given(events, {RuleEvent.UNPLACEABLE: unplaceable_after_ms,
                                      RuleEvent.RUNNING_LONG: running_long_after_ms,
                                      RuleEvent.LATE_START: late_start_after_ms})
        return self._store.rule_add(RuleAddParams(
            channel=channel, project_id=project_id, task_id=task_id, events=events,
            unplaceable_after_ms=given.get(RuleEvent.UNPLACEABLE),
            running_long_after_ms=given.get(RuleEvent.RUNNING_LONG),
            late_start_after_ms=given.get(RuleEvent.LATE_START)))

    def rules(self, channel: str | None = None, project_id: str | None = None) -> list[Rule]:
        return self._store.rule_list(channel=channel, project_id=project_id)

    def remove_rule(self, channel: str, project_id: str, task_id: str | None,
                    events: tuple[RuleEvent, ...] | None = None) -> int:
        """Remove the rule (or only ``events`` of it); how many events were removed."""
        return self._store.rule_remove(RuleRemoveParams(
            channel=channel, project_id=project_id, task_id=task_id, events=events))

    # -- deliveries ---------------------------------------------------------------------

    def deliveries(self, *, status: DeliveryStatus | None = None, channel: str | None = None,
                   limit: int = 50) -> list[Delivery]:
        """The outbox, newest first."""
        return self._store.delivery_list(DeliveryListParams(status=status, channel=channel,
                                                            limit=limit))

    def retry_delivery(self, delivery_id: str) -> Delivery:
        """Send a dead delivery (its id, or the start of it) again from its first attempt."""
        return self._store.delivery_retry(delivery_id)
