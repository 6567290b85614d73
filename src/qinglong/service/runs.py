"""Runs as the surfaces ask for them: listings, one Run with its timeline and log, its whole
log (followed while it runs), and cancelling."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from qinglong.clock import pause
from qinglong.domain.model import Attempt, RunDetail
from qinglong.domain.placement import unplaceable
from qinglong.domain.runs import ENDED_RUN, RunStatus
from qinglong.errors import InvalidInput, NotFound
from qinglong.execution.logs import tail
from qinglong.execution.logship import assemble
from qinglong.service.views.runs import (
    LogLocation,
    RunCancelView,
    RunDetailView,
    RunView,
    run_detail_view,
    run_view,
)
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.logs import LogStore
from qinglong.storage.runs.params import RunListParams

FOLLOW_POLL_S = 0.5


def log_location(path: str | None, in_database: bool = False) -> LogLocation:
    """Where the last attempt's output is, and whether this machine can read it there."""
    if in_database:
        return LogLocation(path=None, readable=True, stored="database", note=None)
    if path is None:
        return LogLocation(path=None, readable=False, stored=None,
                           note="no log was recorded for this attempt")
    readable = Path(path).is_file()
    note = None if readable else (f"the log {path!r} is not on this machine (it is kept where "
                                  "the attempt ran)")
    return LogLocation(path=path, readable=readable, stored="file", note=note)


@dataclass(frozen=True, slots=True)
class LogPiece:
    text: str
    ended: bool  # the Run has ended: nothing more will come
    # the attempt's worker could not store (some of) its output: why, as its ending recorded
    output_lost: str | None = None


def output_lost(detail: RunDetail, attempt: Attempt) -> tuple[int, str] | None:
    """(bytes, why) when the attempt's ending records output its worker could not store."""
    for event in detail.events:
        reason = event.payload.get("output_lost")
        if event.attempt_id == attempt.id and isinstance(reason, str):
            lost = event.payload.get("output_lost_bytes")
            return (lost if isinstance(lost, int) else 0), reason
    return None


def lost_marker(lost: tuple[int, str]) -> str:
    """The line a reader sees where the output that could not be stored would be."""
    return (f"\n[qinglong: {lost[0]} bytes of this attempt's output could not be stored by its "
            f"worker ({lost[1]})]\n")


class RunViews:
    def __init__(self, runs: RunStore, *, logs: LogStore | None = None,
                 offers: Callable[[], list[Mapping[str, str | None]]] | None = None) -> None:
        """``offers``: the labels each live executor offers now (for a queued Run's
        placement; None: not known here)."""
        self._runs = runs
        self._logs = logs
        self._offers = offers

    def acting_as(self, actor: str) -> RunViews:
        """The same views, whose cancels are recorded as ``actor``."""
        return RunViews(self._runs.acting_as(actor), logs=self._logs, offers=self._offers)

    def _unplaceable(self, detail: RunDetail) -> str | None:
        run = detail.run
        if run.status != RunStatus.QUEUED.value or not run.requires or self._offers is None:
            return None
        return unplaceable(run.requires, self._offers())

    def run_list(self, params: RunListParams) -> list[RunView]:
        return [run_view(run) for run in self._runs.run_list(params)]

    def run_show(self, run_id: str, tail_lines: int = 20) -> RunDetailView:
        detail = self._runs.run_get(run_id)
        last = detail.attempts[-1] if detail.attempts else None
        if last is not None and last.log_path is None and self._logs is not None:
            text = assemble(self._logs.log_read(last.id)).decode("utf-8", errors="replace")
            lost = output_lost(detail, last)
            if lost is not None:  # the tail ends with the note `ql run logs` prints
                text += lost_marker(lost)
            lines = text.splitlines()[-tail_lines:] if tail_lines else []
            return run_detail_view(detail, lines, log_location(None, in_database=True),
                                   self._unplaceable(detail))
        path = last.log_path if last is not None else None
        location = log_location(path)
        lines = tail(Path(path), tail_lines) if path and location.readable else []
        return run_detail_view(detail, lines, location, self._unplaceable(detail))

    def run_cancel(self, run_id: str, reason: str = "user") -> RunCancelView:
        status = self._runs.run_cancel(run_id, reason)
        detail = self._runs.run_get(run_id)
        return run_view(detail.run).extended(
            RunCancelView, cancel="done" if status is RunStatus.CANCELLED else "requested")

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
        """An attempt's output: all of it, then (with ``follow``) what comes next. Following
        the latest attempt (no ``attempt`` given) moves on to the next one when the Run is
        retried, and ends when the Run ends."""
        detail = self._runs.run_get(run_id)
        chosen = self.attempt_for_log(detail, attempt)
        while True:
            moved_on = yield from self._one_attempt(detail.run.id, chosen, follow=follow,
                                                    latest=attempt is None, wait=wait)
            if not moved_on:
                return
            detail = self._runs.run_get(detail.run.id)
            chosen = detail.attempts[-1]
            yield LogPiece(f"\n[qinglong: attempt {chosen.attempt}]\n", False)

    def _one_attempt(self, run_id: str, chosen: Attempt, *, follow: bool, latest: bool,
                     wait: Callable[[float], None]) -> Generator[LogPiece, None, bool]:
        """Stream one attempt; True when a newer attempt took over (only when following the
        latest), False when there is nothing more to show."""
        in_database = self._logs is not None and chosen.log_path is None
        shown = b""
        position = 0
        marked = False  # the note on output its worker could not store was shown
        while True:
            # the state is read before the output: no output of this attempt follows its end
            detail = self._runs.run_get(run_id)
            ended = RunStatus(detail.run.status) in ENDED_RUN
            newer = latest and detail.attempts[-1].id != chosen.id
            current = next((a for a in detail.attempts if a.id == chosen.id), chosen)
            if in_database:
                assert self._logs is not None
                whole = assemble(self._logs.log_read(chosen.id))
                # When the cap trimmed the middle under us, the text no longer extends what
                # was shown: show it whole again (the trim marker tells the reader why).
                fresh = whole.removeprefix(shown)
                shown = whole
            else:
                fresh, position = self._file_part(current.log_path, position, follow, run_id)
            if fresh:
                yield LogPiece(fresh.decode("utf-8", errors="replace"), ended)
            lost = output_lost(detail, current) if in_database and not marked else None
            if lost is not None:  # recorded with its ending: no output of it follows
                marked = True
                yield LogPiece(lost_marker(lost), ended, output_lost=lost[1])
            if not follow:
                return False
            if newer:  # a retry took over (it may even have ended already): show it next
                return True
            if ended:
                return False
            wait(FOLLOW_POLL_S)

    @staticmethod
    def _file_part(path: str | None, position: int, follow: bool,
                   run_id: str) -> tuple[bytes, int]:
        if path is None or not Path(path).is_file():
            if not follow:
                raise NotFound("log", path or run_id)
            return b"", position  # not written yet (or not on this machine)
        with Path(path).open("rb") as handle:
            handle.seek(position)
            fresh = handle.read()
        return fresh, position + len(fresh)
