"""Runs as the surfaces ask for them: listings, one Run with its timeline and log, its whole
log (followed while it runs), and cancelling."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from qinglong.clock import pause
from qinglong.domain.model import Attempt, RunDetail
from qinglong.domain.runs import ENDED_RUN, RunStatus
from qinglong.errors import InvalidInput, NotFound
from qinglong.execution.logs import tail
from qinglong.execution.logship import assemble
from qinglong.service import views
from qinglong.service.views import View
from qinglong.storage.ports import (
    RunLifecycleStore,
    RunListParams,
    RunLogStore,
    RunReadStore,
)

FOLLOW_POLL_S = 0.5


def log_location(path: str | None, in_database: bool = False) -> View:
    """Where the last attempt's output is, and whether this machine can read it there."""
    if in_database:
        return {"path": None, "readable": True, "stored": "database", "note": None}
    if path is None:
        return {"path": None, "readable": False, "stored": None,
                "note": "no log was recorded for this attempt"}
    readable = Path(path).is_file()
    note = None if readable else (f"the log {path!r} is not on this machine (it is kept where "
                                  "the attempt ran)")
    return {"path": path, "readable": readable, "stored": "file", "note": note}


@dataclass(frozen=True, slots=True)
class LogPiece:
    text: str
    ended: bool  # the Run has ended: nothing more will come


class RunViews:
    def __init__(self, runs: RunReadStore, *, lifecycle: RunLifecycleStore,
                 logs: RunLogStore | None = None) -> None:
        self._runs = runs
        self._lifecycle = lifecycle
        self._logs = logs

    def run_list(self, params: RunListParams) -> list[View]:
        return [views.run_view(run) for run in self._runs.run_list(params)]

    def run_show(self, run_id: str, tail_lines: int = 20) -> View:
        detail = self._runs.run_get(run_id)
        last = detail.attempts[-1] if detail.attempts else None
        if last is not None and last.log_path is None and self._logs is not None:
            text = assemble(self._logs.log_read(last.id)).decode("utf-8", errors="replace")
            lines = text.splitlines()[-tail_lines:] if tail_lines else []
            return views.run_detail_view(detail, lines, log_location(None, in_database=True))
        path = last.log_path if last is not None else None
        location = log_location(path)
        lines = tail(Path(path), tail_lines) if path and location["readable"] else []
        return views.run_detail_view(detail, lines, location)

    def run_cancel(self, run_id: str, reason: str = "user") -> View:
        status = self._lifecycle.run_cancel(run_id, reason)
        detail = self._runs.run_get(run_id)
        return {**views.run_view(detail.run),
                "cancel": "done" if status is RunStatus.CANCELLED else "requested"}

    def attempt_for_log(self, detail: RunDetail, number: int | None) -> Attempt:
        if not detail.attempts:
            raise InvalidInput("attempt", "the Run has no attempt")
        if number is None:
            return detail.attempts[-1]
        for attempt in detail.attempts:
            if attempt.attempt == number:
                return attempt
        raise InvalidInput("attempt", f"the Run has attempts 1 to {detail.attempts[-1].attempt}")

    def log_stream(self, run_id: str, *, attempt: int | None, follow: bool,
                   wait: Callable[[float], None] = pause) -> Iterator[LogPiece]:
        """An attempt's output: all of it, then (with ``follow``) what comes next, until the
        Run ends."""
        detail = self._runs.run_get(run_id)
        chosen = self.attempt_for_log(detail, attempt)
        if chosen.log_path is None and self._logs is not None:
            yield from self._from_database(detail.run.id, chosen.id, follow, wait)
        else:
            yield from self._from_file(detail.run.id, chosen.log_path, follow, wait)

    def _ended(self, run_id: str) -> bool:
        return RunStatus(self._runs.run_get(run_id).run.status) in ENDED_RUN

    def _from_database(self, run_id: str, attempt_id: str, follow: bool,
                       wait: Callable[[float], None]) -> Iterator[LogPiece]:
        assert self._logs is not None
        shown = b""
        while True:
            ended = self._ended(run_id)  # read before the chunks: none can follow the end
            whole = assemble(self._logs.log_read(attempt_id))
            # When the cap trimmed the middle under us, the text no longer extends what was
            # shown: show it whole again (the trim marker tells the reader why).
            fresh = whole.removeprefix(shown)
            shown = whole
            if fresh:
                yield LogPiece(fresh.decode("utf-8", errors="replace"), ended)
            if not follow or ended:
                return
            wait(FOLLOW_POLL_S)

    def _from_file(self, run_id: str, path: str | None, follow: bool,
                   wait: Callable[[float], None]) -> Iterator[LogPiece]:
        if (path is None or not Path(path).is_file()) and not follow:
            raise NotFound("log", path or run_id)
        position = 0
        while True:
            ended = self._ended(run_id)
            if path is not None and Path(path).is_file():
                with Path(path).open("rb") as handle:
                    handle.seek(position)
                    fresh = handle.read()
                position += len(fresh)
                if fresh:
                    yield LogPiece(fresh.decode("utf-8", errors="replace"), ended)
            if not follow or ended:
                return
            wait(FOLLOW_POLL_S)
