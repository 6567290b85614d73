"""The dispatcher's loop, as each profile runs it over its notify store."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from qinglong.clock import Clock
from qinglong.diagnostics import DiagnosticSink
from qinglong.loops import PacedLoop, StopResult

if TYPE_CHECKING:  # the dispatcher and its network modules load when a service is built
    from qinglong.notify.dispatcher import Dispatcher, NotifyReport, NotifySettings
    from qinglong.storage.notify import NotifyStore

LOOP_NAME = "ql-notify"


class NotifyService:
    """The dispatcher's loop and what it owns; ``stop`` waits for the cycle in flight (a send
    is bounded by its channel's timeout), then closes what the loop opened."""

    def __init__(self, dispatcher: Dispatcher, *, interval_s: float, stop_timeout_s: float,
                 diagnostics: DiagnosticSink | None, close: Callable[[], None]) -> None:
        self.dispatcher = dispatcher
        self._close = close
        self.loop: PacedLoop[NotifyReport] = PacedLoop(
            lambda: dispatcher.run_cycle(self.loop.stop_requested), interval_s=interval_s,
            stop_timeout_s=stop_timeout_s, diagnostics=diagnostics, name=LOOP_NAME,
            idle_cap_s=dispatcher.quiet_pause_s)

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> StopResult:
        result = self.loop.stop()
        if result is StopResult.STOPPED:
            self._close()
        return result


def notify_service(store: NotifyStore, clock: Clock, *, owner: str, stop_timeout_s: float,
                   diagnostics: DiagnosticSink | None, settings: NotifySettings | None = None,
                   close: Callable[[], None] = lambda: None) -> NotifyService:
    """A dispatcher over ``store``: `ql serve` on its SQLite file, every `ql control` replica
    on a PostgreSQL connection of its own (``close`` closes it when the loop has stopped)."""
    from qinglong.notify.dispatcher import Dispatcher, NotifySettings
    from qinglong.notify.senders import Sender

    settings = settings or NotifySettings()
    dispatcher = Dispatcher(store, Sender(clock), clock, owner=owner, settings=settings,
                            diagnostics=diagnostics)
    return NotifyService(dispatcher, interval_s=settings.interval_s,
                         stop_timeout_s=stop_timeout_s, diagnostics=diagnostics, close=close)
