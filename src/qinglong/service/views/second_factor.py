"""The views of the second factor (service.second_factor): its state, a new enrolment's
secret and the recovery codes, each of the last two shown once."""

from __future__ import annotations

from pydantic import Field

from qinglong.service.views.accounts import PrincipalView
from qinglong.service.views.base import ViewModel


class SecondFactorView(ViewModel):
    enabled: bool = Field(description="Logins need a one-time code (or a recovery code)")
    pending: bool = Field(description="An enrolment was started and not confirmed yet")
    required: bool = Field(description="The user's role must have a second factor; while "
                                       "it is not enabled, a password session may only "
                                       "enrol, say who it is and log out")
    recovery_codes_left: int


class WhoamiView(PrincipalView):
    second_factor: SecondFactorView | None = Field(
        description="The user's second factor (null for a token or the CLI)")


class EnrolmentView(ViewModel):
    secret: str = Field(description="The TOTP secret in base32: shown this once")
    otpauth_uri: str = Field(description="otpauth://totp/... for an authenticator app")
    digits: int
    period_s: int


class RecoveryCodesView(ViewModel):
    recovery_codes: list[str] = Field(description="Each usable once instead of a code: shown "
                                                  "this once, stored only as digests")
