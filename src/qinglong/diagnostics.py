"""The diagnostics sink: low-sensitivity notes about errors; it can never stop a loop."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from qinglong.errors import QinglongError

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Diagnostic:
    source: str  # "scheduler", "executor", ...
    code: str  # stable error code, e.g. QL_STORAGE_UNAVAILABLE
    message: str


DiagnosticSink = Callable[[Diagnostic], None]


def diagnostic_from(source: str, exc: BaseException) -> Diagnostic:
    if isinstance(exc, QinglongError):
        return Diagnostic(source=source, code=exc.code, message=exc.message)
    return Diagnostic(source=source, code="QL_INTERNAL", message=type(exc).__name__)


def emit(sink: DiagnosticSink | None, diagnostic: Diagnostic) -> None:
    """Deliver to the sink; whatever the sink raises is logged and swallowed."""
    if sink is None:
        _log.warning("%s %s: %s", diagnostic.source, diagnostic.code, diagnostic.message)
        return
    try:
        sink(diagnostic)
    except Exception:  # noqa: BLE001 - the sink must never take the loop down
        _log.exception("diagnostics sink failed")
