"""Runs as the surfaces ask for them: listings and one Run with its timeline and log."""

from __future__ import annotations

from pathlib import Path

from qinglong.execution.logs import tail
from qinglong.service import views
from qinglong.service.views import View
from qinglong.storage.ports import RunListParams, RunReadStore


def log_location(path: str | None) -> View:
    """Where the last attempt's output is, and whether this machine can read it there."""
    if path is None:
        return {"path": None, "readable": False, "note": "no log was recorded for this attempt"}
    readable = Path(path).is_file()
    note = None if readable else (f"the log {path!r} is not on this machine (it is kept where "
                                  "the attempt ran)")
    return {"path": path, "readable": readable, "note": note}


class RunViews:
    def __init__(self, runs: RunReadStore) -> None:
        self._runs = runs

    def run_list(self, params: RunListParams) -> list[View]:
        return [views.run_view(run) for run in self._runs.run_list(params)]

    def run_show(self, run_id: str, tail_lines: int = 20) -> View:
        detail = self._runs.run_get(run_id)
        last = detail.attempts[-1] if detail.attempts else None
        path = last.log_path if last is not None else None
        location = log_location(path)
        lines = tail(Path(path), tail_lines) if path and location["readable"] else []
        return views.run_detail_view(detail, lines, location)
