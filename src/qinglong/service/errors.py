"""One table from errors to what each surface reports: an exit code and an HTTP status.

Errors are matched by class, first row that fits; never by message text.
"""

from __future__ import annotations

from qinglong.errors import (
    AlreadyRunning,
    BadRequest,
    Conflict,
    DatabaseCorrupt,
    DeliveryFailed,
    Forbidden,
    InvalidInput,
    MethodNotAllowed,
    NotFound,
    NotReady,
    OutcomeUnknown,
    PayloadTooLarge,
    PermissionDenied,
    QinglongError,
    RateLimited,
    RepoFetchFailed,
    SsoProviderFailed,
    StorageError,
    TransientStorageError,
    Unauthenticated,
    UnsupportedMediaType,
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_READY = 3
EXIT_ALREADY_RUNNING = 4
EXIT_VIOLATIONS = 5
EXIT_INTERRUPTED = 130

# (error class, exit code of `ql`, HTTP status of the API)
ERROR_TABLE: tuple[tuple[type[QinglongError], int, int], ...] = (
    (InvalidInput, EXIT_BAD_INPUT, 422),
    (NotFound, EXIT_BAD_INPUT, 404),
    (Conflict, EXIT_BAD_INPUT, 409),
    (PermissionDenied, EXIT_BAD_INPUT, 403),
    (Unauthenticated, EXIT_BAD_INPUT, 401),
    (Forbidden, EXIT_BAD_INPUT, 403),
    (RateLimited, EXIT_FAILURE, 429),
    (BadRequest, EXIT_BAD_INPUT, 400),
    (MethodNotAllowed, EXIT_BAD_INPUT, 405),
    (PayloadTooLarge, EXIT_BAD_INPUT, 413),
    (UnsupportedMediaType, EXIT_BAD_INPUT, 415),
    (DeliveryFailed, EXIT_FAILURE, 502),
    (RepoFetchFailed, EXIT_FAILURE, 502),
    (SsoProviderFailed, EXIT_FAILURE, 502),
    (NotReady, EXIT_NOT_READY, 503),
    (AlreadyRunning, EXIT_ALREADY_RUNNING, 409),
    (TransientStorageError, EXIT_FAILURE, 503),
    (OutcomeUnknown, EXIT_FAILURE, 504),
    (DatabaseCorrupt, EXIT_FAILURE, 500),
    (StorageError, EXIT_FAILURE, 503),
    (QinglongError, EXIT_FAILURE, 500),
)


def _row(exc: QinglongError) -> tuple[int, int]:
    for kind, exit_code, status in ERROR_TABLE:
        if isinstance(exc, kind):
            return exit_code, status
    return EXIT_FAILURE, 500  # pragma: no cover - QinglongError is the last row


def exit_code_for(exc: QinglongError) -> int:
    return _row(exc)[0]


def http_status_for(exc: QinglongError) -> int:
    return _row(exc)[1]


def problem(exc: QinglongError, *, field: str | None = None) -> dict[str, object]:
    """The error as one JSON object (RFC 9457 problem details, with our stable code).

    ``field`` overrides the input field the error names (surfaces name their own options)."""
    body: dict[str, object] = {
        "type": f"urn:qinglong:error:{exc.code}",
        "title": (type(exc).__doc__ or exc.code).strip().splitlines()[0],
        "status": http_status_for(exc),
        "code": exc.code,
        "detail": exc.message,
    }
    if isinstance(exc, InvalidInput):
        body["field"] = field or exc.field
        body["detail"] = f"{field or exc.field}: {exc.rule}"
    if isinstance(exc, NotReady):
        body["findings"] = list(exc.findings)
    return body
