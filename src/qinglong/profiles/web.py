"""The HTTP API as a process serves it: its backend opened over the database a URL names (the
SQLite file for `ql serve --http` and `ql web` on SQLite, a connection pool as ``ql_web`` for
`ql web` on PostgreSQL), and served on a listen address until stopped."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from qinglong.clock import Clock
from qinglong.diagnostics import Diagnostic
from qinglong.profiles.open import OpenOptions, Role, open_services
from qinglong.service.accounts import SessionPolicy
from qinglong.service.oidc_provider import OidcProvider
from qinglong.service.second_factor import SecondFactorPolicy
from qinglong.service.sso import SingleSignOn
from qinglong.service.sso_settings import SsoSettings
from qinglong.storage.kernel import Wake
from qinglong.storage.open import WEB_POOL_SIZE
from qinglong.web.backend import WebBackend
from qinglong.web.server import RunningApi, serve_api
from qinglong.web.transport import Network

__all__ = ["WEB_POOL_SIZE", "open_and_serve", "open_web_backend"]


def open_web_backend(url: str, clock: Clock, *, pool_size: int = WEB_POOL_SIZE,
                     session_policy: SessionPolicy | None = None,
                     second_factor: SecondFactorPolicy | None = None,
                     application_name: str = "ql-web",
                     on_commit: Callable[[Sequence[Wake]], None] | None = None,
                     sso: SsoSettings | None = None) -> WebBackend:
    """``on_commit`` hears what the API's commits change (`ql serve --http`: its own loops
    wake at once for a Run admitted or a trigger published over the API). With ``sso``, the
    provider's discovery document is read first: a provider that cannot be used stops the
    start, saying why, before the database is opened."""
    provider = None
    if sso is not None:
        provider = OidcProvider(sso, clock)
        provider.discover()
    services = open_services(url, clock, role=Role.WEB, options=OpenOptions(
        application_name=application_name, pool_size=pool_size, on_commit=on_commit))
    backend = WebBackend(stores=services.stores, clock=clock, session_policy=session_policy,
                         second_factor_policy=second_factor)
    if provider is not None:
        backend.sso = SingleSignOn(provider, services.stores.oidc, services.stores.accounts,
                                   backend.accounts.policy)
    return backend


def open_and_serve(database_url: str, clock: Clock, listen: str, *,
                   pool_size: int = WEB_POOL_SIZE, session_policy: SessionPolicy | None = None,
                   second_factor: SecondFactorPolicy | None = None,
                   instance_id: str | None = None,
                   diagnostics: Callable[[Diagnostic], None] | None = None,
                   trusted_proxies: tuple[Network, ...] = (),
                   on_commit: Callable[[Sequence[Wake]], None] | None = None,
                   sso: SsoSettings | None = None) -> RunningApi:
    backend = open_web_backend(database_url, clock, pool_size=pool_size,
                               session_policy=session_policy, second_factor=second_factor,
                               on_commit=on_commit, sso=sso)
    try:
        return serve_api(backend, clock, listen, close_backend=True, instance_id=instance_id,
                         diagnostics=diagnostics, trusted_proxies=trusted_proxies)
    except BaseException:
        backend.close()
        raise
