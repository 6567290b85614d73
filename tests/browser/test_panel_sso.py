"""The login page with single sign-on configured: it offers "Log in with single sign-on",
and clicking it goes through the test issuer (tests/support/oidc_issuer.py) and lands on the
dashboard logged in; a refused login shows a page saying why, with a way back. The server
requires a second factor of operators: a single-sign-on session is not sent to enrol one (the
provider's multi-factor is its second factor), a password session of the same user is."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qinglong.clock import SystemClock
from qinglong.storage.sqlite.connection import SqliteDatabase
from qinglong.storage.sqlite.migrate import migrate
from tests.browser.panel_support import Panel, Site
from tests.e2e.test_sso_serve import sso_args
from tests.support.oidc_issuer import Issuer, running_issuer
from tests.support.test_api_support import make_people, start_server


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    with running_issuer() as found:
        yield found


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, issuer: Issuer) -> Iterator[Site]:
    """`ql serve --http` with single sign-on through the test issuer, operators required to
    have a second factor."""
    folder = tmp_path_factory.mktemp("panel-sso")
    path = folder / "ql.db"
    db = SqliteDatabase(path, create=True)
    try:
        migrate(db, SystemClock())
    finally:
        db.close()
    url = f"sqlite:///{path}"
    people = make_people(url)
    server = start_server(["serve", "--database-url", url, "--http", "127.0.0.1:0",
                           "--require-second-factor", "operator",
                           *sso_args(issuer, folder)], folder / "serve.log")
    try:
        yield Site(f"http://127.0.0.1:{server.port}", server, people)
    finally:
        assert server.stop() == 0, server.log.read_text()


def test_single_sign_on_lands_logged_in_on_the_dashboard(panel: Panel, issuer: Issuer) -> None:
    issuer.user = {"sub": "sub-operator", "preferred_username": "operator"}
    panel.d.delete_all_cookies()
    panel.open("/login", "login")
    assert panel.by_id("login-sso").text == "Log in with single sign-on"
    panel.click("#login-sso", "the single sign-on link")
    panel.ready("dashboard")
    assert panel.by_id("who").text == "operator"
    assert ("POST", "/token") in issuer.requests
    panel.open("/runs", "runs")  # not sent to the Account page to enrol


def test_a_password_session_of_the_same_user_must_enrol_first(panel: Panel) -> None:
    panel.login("operator")
    panel.ready("account")
    panel.until(lambda d: panel.shown("#second-required") == 1, "told to enrol first")
    panel.open("/runs", "account")  # every other page sends it there


def test_a_refused_single_sign_on_says_why(panel: Panel, issuer: Issuer) -> None:
    issuer.user = {"sub": "sub-stranger", "preferred_username": "stranger"}
    panel.d.delete_all_cookies()
    panel.open("/login?next=/runs", "login")
    panel.click("#login-sso", "the single sign-on link")
    panel.until(lambda d: panel.css("#sso-error"), "the error page")
    assert "there is no user stranger" in panel.text("sso-error")
    panel.click("a[href='/login']", "the way back")
    panel.ready("login")
