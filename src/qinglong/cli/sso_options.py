"""The single sign-on options of `ql web` and `ql serve --http` (docs/security.md#single-sign-on):
``@sso_options`` adds them and hands the command one ``sso`` argument, the checked settings
(None when --oidc-issuer is not given). The client secret never comes from the command line:
from --oidc-client-secret-file (its first line), else $QL_OIDC_CLIENT_SECRET."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from qinglong.errors import InvalidConfig, InvalidInput

if TYPE_CHECKING:
    from qinglong.service.sso_settings import SsoSettings

SECRET_ENV = "QL_OIDC_CLIENT_SECRET"  # noqa: S105 - the variable's name, not a secret
F = TypeVar("F", bound=Callable[..., Any])
OPTIONS = ("oidc_issuer", "oidc_client_id", "oidc_client_secret_file", "oidc_user_claim",
           "oidc_create_users", "oidc_redirect_uri")


def _secret(path: Path | None) -> str:
    from qinglong.cli.commands.user import first_line

    if path is not None:
        try:
            return first_line(path)
        except InvalidInput as exc:
            raise InvalidConfig("--oidc-client-secret-file", exc.rule) from None
    return os.environ.get(SECRET_ENV, "")


def read_sso_settings(values: dict[str, Any]) -> SsoSettings | None:
    """The settings the --oidc-* options give, checked; None without --oidc-issuer."""
    from qinglong.service.sso_settings import SsoSettings

    issuer = values["oidc_issuer"]
    if not issuer:
        given = [name for name in OPTIONS[1:] if values[name] not in (None, "")
                 and not (name == "oidc_user_claim" and values[name] == "preferred_username")]
        if given:
            raise InvalidConfig("--" + given[0].replace("_", "-"), "needs --oidc-issuer")
        return None
    if not values["oidc_client_id"]:
        raise InvalidConfig("--oidc-client-id", "is required with --oidc-issuer")
    return SsoSettings(issuer=issuer, client_id=values["oidc_client_id"],
                       client_secret=_secret(values["oidc_client_secret_file"]),
                       user_claim=values["oidc_user_claim"],
                       create_role=values["oidc_create_users"],
                       redirect_uri=values["oidc_redirect_uri"])


def sso_options(func: F) -> F:
    """The --oidc-* options; the command gets ``sso`` (SsoSettings or None) instead."""

    @functools.wraps(func)
    def command(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in OPTIONS}
        return func(*args, sso=read_sso_settings(values), **kwargs)

    options = (
        click.option("--oidc-issuer", envvar="QL_OIDC_ISSUER", metavar="URL",
                     help="Single sign-on with this OpenID Connect provider (env "
                          "QL_OIDC_ISSUER): its issuer URL, whose "
                          "/.well-known/openid-configuration is read at start-up. https "
                          "(http only on loopback). The panel's login page then offers "
                          "\"Log in with single sign-on\" (docs/security.md#single-sign-on)."),
        click.option("--oidc-client-id", envvar="QL_OIDC_CLIENT_ID", metavar="ID",
                     help="The client id registered with the provider (env QL_OIDC_CLIENT_ID)."),
        click.option("--oidc-client-secret-file", envvar="QL_OIDC_CLIENT_SECRET_FILE",
                     type=click.Path(dir_okay=False, path_type=Path), metavar="PATH",
                     help="A file whose first line is the client secret (env "
                          "QL_OIDC_CLIENT_SECRET_FILE); else $QL_OIDC_CLIENT_SECRET. Never on "
                          "the command line."),
        click.option("--oidc-user-claim", type=click.Choice(["preferred_username", "email"]),
                     default="preferred_username", show_default=True,
                     help="The ID token claim that names the qinglong user (lowercased; an "
                          "email only when the provider marks it verified)."),
        click.option("--oidc-create-users",
                     type=click.Choice(["none", "viewer", "operator", "admin"]),
                     metavar="ROLE",
                     help="Create a user the claim names who does not exist yet, with this "
                          "role (none: only what per-project grants give, viewer, operator or "
                          "admin; no password: single sign-on only). Default: refuse the "
                          "login; an admin creates users."),
        click.option("--oidc-redirect-uri", envvar="QL_OIDC_REDIRECT_URI", metavar="URL",
                     help="The callback URL registered with the provider, ending in "
                          "/api/v1/sso/callback. Default: made from the request's Host "
                          "(https, or http on loopback); set it behind a proxy."),
    )
    wrapped: Callable[..., Any] = command
    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped  # type: ignore[return-value]
