"""The Account page and the login's second step (issue 23, item 4), in a real browser against
`ql serve --http --require-second-factor admin` with a secret key: a user sets up a second
factor (the secret and the otpauth:// URI shown as text, a code from the "app", the ten
recovery codes shown once), logs out, and logs in again: the login page asks for the code
once the password proved right, says so when the code is wrong, and lets the right one in;
the user turns the second factor off with a recovery code after a confirmation. An admin,
whose role must have one, lands on the Account page until enrolled. The codes are made with
the same clock the server reads (the system's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qinglong.clock import SystemClock
from qinglong.keyring import new_key_text
from qinglong.service import totp
from qinglong.storage.sqlite.connection import SqliteDatabase
from qinglong.storage.sqlite.migrate import migrate
from tests.browser.panel_support import Panel, Site
from tests.support.test_api_support import PASSWORD, make_people, start_server

pytestmark = pytest.mark.slow
CLOCK = SystemClock()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """`ql serve --http` with a secret key (it seals the second factors), admins required
    to have a second factor."""
    folder = tmp_path_factory.mktemp("panel-account")
    path = folder / "ql.db"
    db = SqliteDatabase(path, create=True)
    try:
        migrate(db, CLOCK)
    finally:
        db.close()
    url = f"sqlite:///{path}"
    people = make_people(url)
    server = start_server(["serve", "--database-url", url, "--http", "127.0.0.1:0",
                           "--interval", "250ms", "--require-second-factor", "admin"],
                          folder / "serve.log", env={"QL_SECRET_KEY": new_key_text()})
    try:
        yield Site(f"http://127.0.0.1:{server.port}", server, people)
    finally:
        assert server.stop() == 0, server.log.read_text()


def _user(site: Site, name: str, role: str = "operator") -> None:
    site.http.ok("POST", "/api/v1/users", site.admin,
                 {"username": name, "role": role, "password": PASSWORD}, (201, 409))


def _enrol(panel: Panel) -> tuple[str, list[str]]:
    panel.open("/account", "account")
    panel.until(lambda d: "Off" in panel.text("second-state"), "the state: off")
    panel.click("#second-begin", "Set up")
    secret = panel.until(lambda d: panel.text("second-secret"), "the secret shown")
    assert panel.text("second-uri").startswith("otpauth://totp/qinglong:")
    assert f"secret={secret}" in panel.text("second-uri")
    panel.fill("second-confirm-otp", totp.code_at(secret, CLOCK.now_ms()))
    panel.by_id("second-confirm-submit").click()
    panel.until(lambda d: panel.shown("#second-codes li") == 10, "ten recovery codes")
    codes = [str(code) for code in panel.d.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('#second-codes li'),"
        " function (n) { return n.textContent; });")]
    panel.until(lambda d: "On" in panel.text("second-state"), "the state: on")
    assert panel.text("second-secret") == ""  # shown once: gone from the page
    return secret, codes


def test_a_user_sets_up_a_second_factor_and_logs_in_with_a_code(panel: Panel,
                                                                 site: Site) -> None:
    _user(site, "tess")
    panel.login("tess")
    secret, codes = _enrol(panel)
    assert len(set(codes)) == 10
    panel.shot("enrolled")
    panel.by_id("logout").click()
    panel.ready("login")
    panel.fill("login-username", "tess")
    panel.fill("login-password", PASSWORD)
    panel.by_id("login-submit").click()
    panel.until(lambda d: panel.shown("#login-otp") == 1, "the code asked for")
    assert panel.text("login-error") == ""  # asked, not scolded
    wrong = "000000" if totp.code_at(secret, CLOCK.now_ms()) != "000000" else "111111"
    panel.fill("login-otp", wrong)
    panel.by_id("login-submit").click()
    panel.until(lambda d: "wrong" in panel.text("login-error"), "the wrong code said so")
    panel.fill("login-otp", totp.code_at(secret, CLOCK.now_ms() + 30_000))  # not used yet
    panel.by_id("login-submit").click()
    panel.until(lambda d: d.execute_script(
        "return document.body.getAttribute('data-page') !== 'login' && "
        "document.body.getAttribute('data-ready') === 'true'"), "logged in with the code")
    assert panel.by_id("who").text == "tess"
    # turned off with a recovery code, after a confirmation beside the button
    panel.open("/account", "account")
    panel.until(lambda d: "Recovery codes left: 10" in panel.text("second-state"), "on")
    panel.fill("second-off-recovery", codes[0])
    panel.by_id("second-off-submit").click()
    panel.click(".confirm-yes", "the confirmation")
    panel.until(lambda d: "Off" in panel.text("second-state"), "turned off")
    assert site.http.call("POST", "/api/v1/session", body={
        "username": "tess", "password": PASSWORD}).status == 200


def test_a_wrong_recovery_code_is_refused_beside_the_control(panel: Panel, site: Site) -> None:
    _user(site, "rory")
    panel.login("rory")
    _enrol(panel)
    panel.open("/account", "account")
    panel.until(lambda d: "On" in panel.text("second-state"), "on")  # its form shown
    panel.fill("second-off-recovery", "aaaa-bbbb-cccc-dddd")
    panel.by_id("second-off-submit").click()
    panel.click(".confirm-yes", "the confirmation")
    panel.until(lambda d: "wrong" in panel.text("second-off-problem"), "the refusal")
    assert "On" in panel.text("second-state")


def test_an_admin_must_enrol_before_anything_else(panel: Panel, site: Site) -> None:
    panel.login("admin")  # the server requires a second factor of admins
    panel.ready("account")
    panel.until(lambda d: panel.shown("#second-required") == 1, "told to enrol first")
    panel.open("/", "account")  # every other page sends them here
    assert site.http.ok("GET", "/api/v1/projects", site.admin) is not None  # tokens: not gated
    _enrol(panel)
    panel.until(lambda d: panel.shown("#second-required") == 0, "no longer told to enrol")
    panel.open("/", "dashboard")
