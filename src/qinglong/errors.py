"""The one error hierarchy of qinglong; every class carries a stable code.

Messages are short and low-sensitivity: they name the field and the rule that was
broken, never a password, a URL with credentials, or a command's environment.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass


class QinglongError(Exception):
    """Something went wrong in qinglong."""

    code = "QL_ERROR"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or self.code).strip())

    @property
    def message(self) -> str:
        return str(self.args[0])


class InvalidInput(QinglongError, ValueError):
    """An input value breaks a rule."""

    code = "QL_INVALID_INPUT"

    def __init__(self, field: str, rule: str) -> None:
        self.field = field
        self.rule = rule
        super().__init__(f"{field}: {rule}")


class InvalidSchedule(InvalidInput):
    """A cron expression or time zone is not usable."""

    code = "QL_INVALID_SCHEDULE"


class InvalidConfig(InvalidInput):
    """A configuration value breaks a rule."""

    code = "QL_INVALID_CONFIG"


class SecretKeyMissing(InvalidConfig):
    """The secret key of project environments is needed here and is not given (or is not a
    key)."""

    code = "QL_SECRET_KEY_MISSING"


class SecretKeyMismatch(InvalidConfig):
    """A secret was sealed under another key than this process's (or does not open)."""

    code = "QL_SECRET_KEY_MISMATCH"


class NotFound(QinglongError, LookupError):
    """A record does not exist."""

    code = "QL_NOT_FOUND"

    def __init__(self, kind: str, ident: str) -> None:
        self.kind = kind
        self.ident = ident
        super().__init__(f"{kind} {ident!r} not found")


class Conflict(QinglongError):
    """The durable state does not allow this change."""

    code = "QL_CONFLICT"


class IllegalTransition(Conflict):
    """A Run or Attempt may not take this step from its current status."""

    code = "QL_ILLEGAL_TRANSITION"


class LeaseLost(Conflict):
    """The lease this write was made under is no longer held (expired, taken over or ended)."""

    code = "QL_LEASE_LOST"


class PermissionDenied(QinglongError):
    """The database role lacks a privilege this operation needs."""

    code = "QL_PERMISSION_DENIED"


class RecordCorrupt(QinglongError):
    """A stored record failed its digest or shape check."""

    code = "QL_RECORD_CORRUPT"


class StorageError(QinglongError):
    """The database could not complete the operation."""

    code = "QL_STORAGE_UNAVAILABLE"


class DatabaseCorrupt(StorageError):
    """The database file is damaged (or is not a database at all)."""

    code = "QL_DATABASE_CORRUPT"


class TransientStorageError(StorageError):
    """A retryable database failure (serialization, deadlock, lock timeout, busy)."""

    code = "QL_STORAGE_TRANSIENT"


class ConnectionLost(StorageError):
    """The database connection is gone."""

    code = "QL_CONNECTION_LOST"


class ServerNotWritable(StorageError):
    """The server refused a write: it is a standby or read-only."""

    code = "QL_SERVER_NOT_WRITABLE"


class OutcomeUnknown(StorageError):
    """COMMIT was sent but its outcome is not known; durable facts must decide."""

    code = "QL_OUTCOME_UNKNOWN"


class NotReady(QinglongError):
    """The database is not ready for this process (schema, roles or server state)."""

    code = "QL_NOT_READY"

    def __init__(self, findings: list[str] | tuple[str, ...], message: str | None = None) -> None:
        self.findings = tuple(findings)
        super().__init__(message or "not ready: " + ", ".join(self.findings))


class AlreadyRunning(QinglongError):
    """Another process already serves this database."""

    code = "QL_ALREADY_RUNNING"


@dataclass(eq=False, repr=False)
class InstanceHeld(AlreadyRunning):
    """Another live process holds this instance id (``--owner-id``, ``--worker-id``, ``--name``).

    Its registration has not stopped and its heartbeat is younger than the staleness window;
    the fields say who holds it, for the message and for a start that watches the holder."""

    code = "QL_INSTANCE_HELD"

    instance_id: str = ""
    _: KW_ONLY
    role: str = ""
    host: str = ""
    pid: int = 0
    seen_at_ms: int = 0
    silent_ms: int = 0
    stale_ms: int = 0

    def __post_init__(self) -> None:
        super().__init__(
            f"instance id {self.instance_id!r} is held by a live {self.role or 'qinglong'} "
            f"process (pid {self.pid} on {self.host or '?'}, last heartbeat "
            f"{self.silent_ms / 1000:.1f} s ago): each process needs an id of its own; stop that "
            "process or choose another id (the id of a process that crashed is free "
            f"{self.stale_ms // 1000} s after its last heartbeat)")


class NotRunnable(Conflict):
    """The task or trigger cannot run now.

    It is disabled, its project is archived, or the trigger pins a task revision that is no
    longer current."""

    code = "QL_NOT_RUNNABLE"


class RequestIdConflict(Conflict):
    """The request id already admitted a Run for another task or trigger, or with other
    parameter values."""

    code = "QL_REQUEST_ID_CONFLICT"


# -- what only the HTTP API raises (authentication, routes, request bodies) ---------------


class Unauthenticated(QinglongError):
    """Authentication is required: log in, or send an API token."""

    code = "QL_UNAUTHENTICATED"


class Forbidden(QinglongError):
    """Your role or token scope does not allow this."""

    code = "QL_FORBIDDEN"


class InsecureTransport(Forbidden):
    """A browser login over plain HTTP to an address that is not loopback: the browser would
    drop the Secure session cookie."""

    code = "QL_INSECURE_TRANSPORT"


class SecondFactorRequired(Unauthenticated):
    """The password was right and the user has a second factor: the login needs its one-time
    code (``otp``) or a recovery code too; or the one sent is wrong or was used already."""

    code = "QL_SECOND_FACTOR_REQUIRED"


class SecondFactorEnrolmentRequired(Forbidden):
    """The user's role must log in with a second factor and the user has none yet: until
    they enrol one, their session may only say who they are, enrol and log out."""

    code = "QL_SECOND_FACTOR_ENROLMENT_REQUIRED"


class SsoRefused(Unauthenticated):
    """Single sign-on did not log you in."""

    code = "QL_SSO_REFUSED"


class SsoProviderFailed(QinglongError):
    """The single sign-on provider did not answer as it should."""

    code = "QL_SSO_PROVIDER_FAILED"


class RateLimited(QinglongError):
    """Too many failed logins; wait before trying again."""

    code = "QL_RATE_LIMITED"

    def __init__(self, message: str = "too many failed logins", retry_after_s: int = 60) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message)


class BadRequest(QinglongError):
    """The request cannot be read (its JSON, its content type or its form)."""

    code = "QL_BAD_REQUEST"


class MethodNotAllowed(QinglongError):
    """This route does not answer this method."""

    code = "QL_METHOD_NOT_ALLOWED"

    def __init__(self, method: str = "", allowed: tuple[str, ...] = ()) -> None:
        self.allowed = allowed
        super().__init__(f"{method} is not allowed here; allowed: {', '.join(allowed)}")


class PayloadTooLarge(QinglongError):
    """The request body is too large."""

    code = "QL_PAYLOAD_TOO_LARGE"


class UnsupportedMediaType(QinglongError):
    """The request body must be JSON (Content-Type: application/json)."""

    code = "QL_UNSUPPORTED_MEDIA_TYPE"


class InternalError(QinglongError):
    """Something went wrong inside the server; it was logged."""

    code = "QL_INTERNAL"


# -- notifications -----------------------------------------------------------------------


class DeliveryFailed(QinglongError):
    """A notification could not be delivered."""

    code = "QL_NOTIFY_DELIVERY_FAILED"


class RepoFetchFailed(QinglongError):
    """A subscription's repository could not be fetched (git's own words follow)."""

    code = "QL_REPO_FETCH_FAILED"
