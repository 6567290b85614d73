"""One table maps every error to an exit code and an HTTP status; problems carry stable codes."""

from __future__ import annotations

import pytest

from qinglong import errors
from qinglong.service.errors import ERROR_TABLE, exit_code_for, http_status_for, problem

EXPECTED = {
    errors.InvalidInput: (2, 422),
    errors.InvalidSchedule: (2, 422),
    errors.InvalidConfig: (2, 422),
    errors.SecretKeyMissing: (2, 422),
    errors.SecretKeyMismatch: (2, 422),
    errors.NotFound: (2, 404),
    errors.Conflict: (2, 409),
    errors.IllegalTransition: (2, 409),
    errors.LeaseLost: (2, 409),
    errors.NotRunnable: (2, 409),
    errors.RequestIdConflict: (2, 409),
    errors.PermissionDenied: (2, 403),
    errors.NotReady: (3, 503),
    errors.AlreadyRunning: (4, 409),
    errors.InstanceHeld: (4, 409),
    errors.TransientStorageError: (1, 503),
    errors.OutcomeUnknown: (1, 504),
    errors.DatabaseCorrupt: (1, 500),
    errors.ConnectionLost: (1, 503),
    errors.ServerNotWritable: (1, 503),
    errors.StorageError: (1, 503),
    errors.RecordCorrupt: (1, 500),
    errors.Unauthenticated: (2, 401),
    errors.Forbidden: (2, 403),
    errors.InsecureTransport: (2, 403),
    errors.SecondFactorRequired: (2, 401),
    errors.SecondFactorEnrolmentRequired: (2, 403),
    errors.RateLimited: (1, 429),
    errors.BadRequest: (2, 400),
    errors.MethodNotAllowed: (2, 405),
    errors.PayloadTooLarge: (2, 413),
    errors.UnsupportedMediaType: (2, 415),
    errors.InternalError: (1, 500),
    errors.DeliveryFailed: (1, 502),
    errors.RepoFetchFailed: (1, 502),
    errors.SsoRefused: (2, 401),
    errors.SsoProviderFailed: (1, 502),
    errors.QinglongError: (1, 500),
}


def make(kind: type[errors.QinglongError]) -> errors.QinglongError:
    if issubclass(kind, errors.InvalidInput):
        return kind("cron", "must have 5 fields")
    if kind is errors.NotFound:
        return kind("task", "hello")
    if kind is errors.NotReady:
        return kind(["schema-missing"])
    return kind()


def every_error_class() -> list[type[errors.QinglongError]]:
    found = [v for v in vars(errors).values()
             if isinstance(v, type) and issubclass(v, errors.QinglongError)]
    return sorted(found, key=lambda k: k.__name__)


def test_every_error_class_is_in_the_expectations() -> None:
    assert set(every_error_class()) == set(EXPECTED)


@pytest.mark.parametrize("kind", every_error_class(), ids=lambda k: k.__name__)
def test_each_error_maps_to_its_exit_code_and_status(kind: type[errors.QinglongError]) -> None:
    exc = make(kind)
    assert (exit_code_for(exc), http_status_for(exc)) == EXPECTED[kind]


def test_the_last_row_catches_everything() -> None:
    assert ERROR_TABLE[-1][0] is errors.QinglongError


def test_a_problem_names_the_field_the_surface_uses() -> None:
    body = problem(errors.InvalidInput("command.command", "must not be empty"), field="--shell")
    assert body == {"type": "urn:qinglong:error:QL_INVALID_INPUT",
                    "title": "An input value breaks a rule.", "status": 422,
                    "code": "QL_INVALID_INPUT", "detail": "--shell: must not be empty",
                    "field": "--shell"}
    ready = problem(errors.NotReady(["schema-missing"]))
    assert ready["findings"] == ["schema-missing"] and ready["status"] == 503


def test_codes_are_unique() -> None:
    codes = [kind.code for kind in every_error_class()]
    assert len(codes) == len(set(codes))
