"""The Users page's second factor column (issue 23, item 4), in a real browser against `ql
serve --http` with a secret key: each user's state (off, pending, on) as GET /api/v1/users
says it; an admin resets one (after a confirmation beside the button: No keeps it, Yes resets
it, and the user logs in with the password alone); a user with none has no reset control; a
viewer sees no reset control at all. Enrolments are made over the API, with codes on the
system clock the server reads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qinglong.clock import SystemClock
from qinglong.keyring import new_key_text
from qinglong.service import totp
from qinglong.storage.sqlite.connection import SqliteDatabase
from qinglong.storage.sqlite.migrate import migrate
from tests.browser.panel_support import Panel, Site
from tests.support.test_api_support import PASSWORD, Auth, login, make_people, start_server

pytestmark = pytest.mark.slow
CLOCK = SystemClock()
MINE = "/api/v1/account/second-factor"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """`ql serve --http` with a secret key (it seals the second factors)."""
    folder = tmp_path_factory.mktemp("panel-users-second-factor")
    path = folder / "ql.db"
    db = SqliteDatabase(path, create=True)
    try:
        migrate(db, CLOCK)
    finally:
        db.close()
    url = f"sqlite:///{path}"
    people = make_people(url)
    server = start_server(["serve", "--database-url", url, "--http", "127.0.0.1:0",
                           "--interval", "250ms"], folder / "serve.log",
                          env={"QL_SECRET_KEY": new_key_text()})
    try:
        yield Site(f"http://127.0.0.1:{server.port}", server, people)
    finally:
        assert server.stop() == 0, server.log.read_text()


def _user(site: Site, name: str) -> Auth:
    """``name`` (an operator), and a password session of theirs."""
    site.http.ok("POST", "/api/v1/users", site.admin,
                 {"username": name, "role": "operator", "password": PASSWORD}, (201, 409))
    return login(site.http, name)


def _enrol(site: Site, name: str, *, confirm: bool) -> None:
    session = _user(site, name)
    secret = site.http.ok("POST", MINE, session, status=201)["secret"]
    if confirm:
        site.http.ok("POST", MINE + "/confirm", session,
                     {"otp": totp.code_at(secret, CLOCK.now_ms())})


def _state(site: Site, name: str) -> str:
    users = site.http.ok("GET", "/api/v1/users", site.admin)
    return str(next(u["second_factor"] for u in users if u["username"] == name))


def _shown(panel: Panel, name: str) -> str:
    found = panel.d.execute_script(
        "var n = document.querySelector('[data-second-factor-of=\"' + arguments[0] + '\"]');"
        " return n ? n.textContent : '';", name)
    return str(found)


def test_an_admin_sees_each_state_and_resets_a_second_factor(panel: Panel, site: Site) -> None:
    _enrol(site, "sam", confirm=True)
    _enrol(site, "pat", confirm=False)
    _user(site, "olga")
    panel.login("admin")
    panel.open("/users", "users")
    panel.until(lambda d: _shown(panel, "sam") == "on", "sam's second factor: on")
    assert (_shown(panel, "pat"), _shown(panel, "olga")) == ("pending", "off")
    assert panel.shown('button[data-reset-second-factor="olga"]') == 0  # nothing to reset
    assert panel.shown('button[data-reset-second-factor="pat"]') == 1
    panel.shot("states")
    # a reset asks first, beside the button: No keeps it
    panel.click('button[data-reset-second-factor="sam"]', "Reset second factor")
    panel.click('tr[data-user="sam"] .confirm-no', "No")
    assert _state(site, "sam") == "on"
    assert site.http.call("POST", "/api/v1/session", body={
        "username": "sam", "password": PASSWORD}).status == 401  # the code is asked for
    panel.click('button[data-reset-second-factor="sam"]', "Reset second factor")
    panel.click('tr[data-user="sam"] .confirm-yes', "Yes")
    panel.until(lambda d: "Reset sam's second factor" in panel.text("users-result"),
                "the reset said")
    panel.until(lambda d: _shown(panel, "sam") == "off", "sam's second factor: off")
    assert panel.shown('button[data-reset-second-factor="sam"]') == 0
    assert _state(site, "sam") == "off"
    login(site.http, "sam")  # the password alone logs in again
    audit = site.http.ok("GET", "/api/v1/audit?action=second-factor.reset", site.admin)
    assert [e["target"] for e in audit["items"]][:1] == ["user sam"]


def test_the_audit_page_suggests_the_second_factor_actions(panel: Panel, site: Site) -> None:
    panel.login("admin")
    panel.open("/audit", "audit")
    offered = panel.d.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('#audit-actions option'),"
        " function (o) { return o.value; });")
    assert {"second-factor", "second-factor.reset", "second-factor.enable"} <= set(offered)


def test_a_viewer_sees_no_reset_control(panel: Panel, site: Site) -> None:
    _enrol(site, "vera", confirm=True)
    panel.login("viewer")
    panel.open("/users", "users")
    panel.until(lambda d: panel.text("problem") or panel.css("#users tbody tr"),
                "the page filled (or the API's refusal shown)")
    assert panel.shown("button[data-reset-second-factor]") == 0
    assert panel.shown('#users tr[data-user="vera"] button') == 0
