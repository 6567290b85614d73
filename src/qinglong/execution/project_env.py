"""The project environment a command gets (docs/controls/environments.md): the enabled
entries of the revision its lease was granted with, secrets opened with this executor's key
(``QL_SECRET_KEY`` or ``QL_SECRET_KEY_FILE`` in the environment it started with, which a
command never inherits).

All or nothing: when one secret cannot be opened (no key, another key, an altered seal) the
command does not start; ``EnvironmentUnavailable`` is an OSError so the spawn records it as a
start that failed, with a line in the Attempt's log naming the stable code and the
revision, never a value.
"""

from __future__ import annotations

from collections.abc import Mapping

from qinglong import keyring
from qinglong.domain.project_env import LeasedEnvironment
from qinglong.errors import QinglongError


class EnvironmentUnavailable(OSError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.strerror = f"{code}: {message}"


def project_variables(environment: LeasedEnvironment | None,
                      inherited: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environment``, every secret opened; raises EnvironmentUnavailable
    when any cannot be."""
    if environment is None:
        return {}
    where = f"project environment revision {environment.revision}"
    key: keyring.SecretKey | None = None
    found: dict[str, str] = {}
    try:
        for variable in environment.variables:
            if variable.sealed is None:
                found[variable.name] = variable.value or ""
                continue
            if key is None:
                key = keyring.require(keyring.key_from(inherited),
                                      f"{where} holds secrets: this executor")
            context = f"qinglong env\x00{environment.project_id}\x00{variable.name}".encode()
            opened = keyring.open_sealed(key, variable.key_id or "", variable.sealed, context,
                                         f"{variable.name} of {where}")
            found[variable.name] = opened.decode("utf-8")
    except QinglongError as exc:
        raise EnvironmentUnavailable(exc.code, exc.message) from None
    except UnicodeDecodeError:
        raise EnvironmentUnavailable("QL_SECRET_KEY_MISMATCH",
                                     f"a secret of {where} is not text") from None
    return found
