"""The Users and API tokens pages (issue 23, item 1), in a real browser against `ql serve
--http`: an admin adds a user typing the password twice, changes a role, disables (after a
confirmation beside the button) and enables a user and sets a new password; the API's refusal
(an admin disabling themselves) is shown beside the control that asked. A user creates a token
with a name, scope and expiry, sees its secret once with a copy button, and revokes it after a
confirmation; an admin makes one for someone else and lists everyone's. A viewer sees no user
control and no admin page in the navigation, and on the tokens page only what the API lets a
viewer do: read-scoped tokens of their own."""

from __future__ import annotations

import pytest

from tests.browser.panel_support import Panel, Site
from tests.support.test_api_support import PASSWORD, Auth

pytestmark = pytest.mark.slow

OTHER_PASSWORD = "another horse battery staple"


def _user_state(site: Site, username: str) -> dict[str, object]:
    users = site.http.ok("GET", "/api/v1/users", site.admin)
    return next(u for u in users if u["username"] == username)


def _ensure_user(site: Site, username: str, role: str = "viewer") -> None:
    site.http.ok("POST", "/api/v1/users", site.admin,
                 {"username": username, "role": role, "password": PASSWORD}, (201, 409))


def _row(panel: Panel, table: str, attribute: str, key: str) -> list[str]:
    found = panel.d.execute_script(
        "var r = document.querySelector('#' + arguments[0] + ' tr[' + arguments[1] + '=\"' +"
        " arguments[2] + '\"]'); return r ? Array.prototype.map.call(r.cells,"
        " function (c) { return c.textContent; }) : null;", table, attribute, key)
    return [str(cell) for cell in found] if isinstance(found, list) else []


def _login_status(site: Site, username: str, password: str) -> int:
    return site.http.call("POST", "/api/v1/session",
                          body={"username": username, "password": password}).status


# --- users ------------------------------------------------------------------------------------


def test_an_admin_adds_a_user_typing_the_password_twice(panel: Panel, site: Site) -> None:
    panel.login("admin")
    panel.open("/users", "users")
    panel.until(lambda d: _row(panel, "users", "data-user", "admin"), "the admin's row")
    panel.fill("user-name", "dora")
    panel.by_id("user-role").send_keys("operator")
    panel.fill("user-password", PASSWORD)
    panel.fill("user-password2", PASSWORD + "x")
    panel.by_id("user-create-submit").click()
    said = panel.until(lambda d: panel.text("user-create-problem"), "the mismatch")
    assert "differ" in said
    assert not any(u["username"] == "dora"
                   for u in site.http.ok("GET", "/api/v1/users", site.admin))
    panel.fill("user-password2", PASSWORD)
    panel.by_id("user-password2").submit()  # Enter in the form: keyboard only
    panel.until(lambda d: "Added dora (operator)" in panel.text("users-result"), "the answer")
    row = panel.until(lambda d: _row(panel, "users", "data-user", "dora"), "dora's row")
    assert row[0] == "dora" and row[2] == "active", row
    assert _user_state(site, "dora")["role"] == "operator"
    assert _login_status(site, "dora", PASSWORD) == 200
    assert panel.by_id("user-password").get_attribute("value") == ""  # never kept
    # a name the API refuses: its problem beside the form
    panel.fill("user-name", "Not Valid")
    panel.fill("user-password", PASSWORD)
    panel.fill("user-password2", PASSWORD)
    panel.by_id("user-create-submit").click()
    refused = panel.until(lambda d: panel.text("user-create-problem"), "the refusal")
    assert "username" in refused, refused


def test_an_admin_changes_a_role_disables_enables_and_sets_a_password(panel: Panel,
                                                                    site: Site) -> None:
    _ensure_user(site, "erin", "viewer")
    site.http.ok("PATCH", "/api/v1/users/erin", site.admin,
                 {"role": "viewer", "disabled": False, "password": PASSWORD})
    panel.login("admin")
    panel.open("/users", "users")
    panel.until(lambda d: _row(panel, "users", "data-user", "erin"), "erin's row")
    # change the role
    panel.by_id("role-erin").send_keys("operator")
    panel.click('button[data-set-role="erin"]', "Change role")
    panel.until(lambda d: "erin is now operator" in panel.text("users-result"), "the change")
    assert _user_state(site, "erin")["role"] == "operator"
    # disabling asks first: No keeps the user
    panel.click('button[data-toggle="erin"]', "Disable")
    panel.click('tr[data-user="erin"] .confirm-no', "No")
    assert not _user_state(site, "erin")["disabled"]
    panel.click('button[data-toggle="erin"]', "Disable")
    panel.click('tr[data-user="erin"] .confirm-yes', "Yes")
    panel.until(lambda d: _row(panel, "users", "data-user", "erin")[2] == "disabled",
                "erin disabled")
    assert _user_state(site, "erin")["disabled"] is True
    assert _login_status(site, "erin", PASSWORD) == 401
    panel.click('button[data-toggle="erin"]', "Enable")
    panel.until(lambda d: _row(panel, "users", "data-user", "erin")[2] == "active",
                "erin enabled")
    assert _login_status(site, "erin", PASSWORD) == 200
    # a new password, typed twice
    panel.click('button[data-password="erin"]', "Set password")
    panel.fill("pw-erin", OTHER_PASSWORD)
    panel.fill("pw2-erin", OTHER_PASSWORD + "!")
    panel.click('button[data-save-password="erin"]', "Save")
    said = panel.until(lambda d: panel.css('tr[data-user="erin"] .problem:not([hidden])'),
                       "the mismatch beside the form")
    assert "differ" in said[0].text
    panel.fill("pw2-erin", OTHER_PASSWORD)
    panel.click('button[data-save-password="erin"]', "Save")
    panel.until(lambda d: "Set a new password for erin" in panel.text("users-result"),
                "the new password")
    assert _login_status(site, "erin", PASSWORD) == 401
    assert _login_status(site, "erin", OTHER_PASSWORD) == 200


def test_the_apis_refusal_is_shown_beside_the_control(panel: Panel, site: Site) -> None:
    panel.login("admin")
    panel.open("/users", "users")
    panel.click('button[data-toggle="admin"]', "the admin's own Disable")
    panel.click('tr[data-user="admin"] .confirm-yes', "Yes")
    refused = panel.until(lambda d: panel.css('span[data-problem="admin"]:not([hidden])'),
                          "the refusal")
    assert "cannot disable or demote themselves" in refused[0].text, refused[0].text
    assert _user_state(site, "admin")["disabled"] is False
    panel.by_id("role-admin").send_keys("viewer")
    panel.click('button[data-set-role="admin"]', "the admin's own Change role")
    panel.until(lambda d: "demote" in panel.by_id("users").text, "the refusal again")
    assert _user_state(site, "admin")["role"] == "admin"


def test_a_viewer_sees_no_user_control_and_no_admin_page_in_the_navigation(
        panel: Panel, site: Site) -> None:
    panel.login("viewer")
    panel.open("/users", "users")
    panel.until(lambda d: panel.text("problem"), "the API's refusal")
    # what shows is read-only: the project whose grants are listed, and nothing to write
    assert panel.shown("#main button, #main input, #main textarea") == 0
    assert panel.shown("#main select") == panel.shown("#grants-project") == 1
    assert panel.shown('nav a[href="/users"]') == 0 and panel.shown('nav a[href="/audit"]') == 0
    assert panel.shown('nav a[href="/tokens"]') == 1 and panel.shown('nav a[href="/cluster"]') == 1
    assert panel.shown("#grant-add") == 0 and panel.shown("[data-revoke-grant]") == 0


# --- roles on one project ------------------------------------------------------------------------


def _grants(site: Site, project: str) -> list[tuple[str, str]]:
    return [(g["username"], g["role"]) for g in
            site.http.ok("GET", f"/api/v1/projects/{project}/grants", site.admin)]


def test_an_admin_grants_a_role_on_one_project_and_takes_it_back(panel: Panel,
                                                                site: Site) -> None:
    site.http.ok("POST", "/api/v1/projects", site.admin, {"id": "granted"}, (201, 409))
    site.http.ok("POST", "/api/v1/users", site.admin,
                 {"username": "gina", "role": "none", "password": PASSWORD}, (201, 409))
    panel.login("admin")
    panel.open("/users", "users")
    panel.choose("grants-project", "granted")
    panel.until(lambda d: panel.shown("#grant-add") == 1, "the grant form")
    panel.fill("grant-user", "gina")
    panel.by_id("grant-role").send_keys("operator")
    panel.by_id("grant-add-submit").click()
    panel.until(lambda d: "gina is operator on granted" in panel.text("grants-result"),
                "the grant")
    row = panel.until(lambda d: _row(panel, "grants", "data-grant", "gina"), "gina's grant")
    assert row[1:3] == ["operator", "admin"], row
    assert _grants(site, "granted") == [("gina", "operator")]
    # a user that does not exist: the API's problem beside the form
    panel.fill("grant-user", "nobody-here")
    panel.by_id("grant-add-submit").click()
    said = panel.until(lambda d: panel.text("grant-add-problem"), "the refusal")
    assert "nobody-here" in said, said
    # taking it back asks first
    panel.click('button[data-revoke-grant="gina"]', "Take back")
    panel.click('tr[data-grant="gina"] .confirm-yes', "Yes")
    panel.until(lambda d: not _row(panel, "grants", "data-grant", "gina"), "the grant gone")
    assert _grants(site, "granted") == []


def test_a_projects_admin_manages_its_grants_but_no_user(panel: Panel, site: Site) -> None:
    site.http.ok("POST", "/api/v1/projects", site.admin, {"id": "pams"}, (201, 409))
    site.http.ok("POST", "/api/v1/users", site.admin,
                 {"username": "pam", "role": "none", "password": PASSWORD}, (201, 409))
    site.http.ok("PUT", "/api/v1/projects/pams/grants/pam", site.admin, {"role": "admin"})
    panel.login("pam")
    assert panel.shown('nav a[href="/users"]') == 1 and panel.shown('nav a[href="/audit"]') == 0
    panel.open("/users", "users")
    panel.until(lambda d: panel.text("problem"), "the users list refused")
    assert panel.shown("#user-create") == 0 and panel.shown("[data-toggle]") == 0
    panel.until(lambda d: panel.by_id("grants-project").get_attribute("value") == "pams",
                "her project chosen")
    panel.until(lambda d: panel.shown("#grant-add") == 1, "the grant form")
    panel.fill("grant-user", "viewer")
    panel.by_id("grant-role").send_keys("operator")
    panel.by_id("grant-add-submit").click()
    panel.until(lambda d: _row(panel, "grants", "data-grant", "viewer"), "the viewer's grant")
    assert ("viewer", "operator") in _grants(site, "pams")
    site.http.ok("DELETE", "/api/v1/projects/pams/grants/viewer", site.admin, status=204)


# --- tokens -----------------------------------------------------------------------------------


def test_a_user_creates_a_token_sees_it_once_copies_it_and_it_works(panel: Panel,
                                                                  site: Site) -> None:
    for project in ("tok-a", "tok-b"):
        site.http.ok("POST", "/api/v1/projects", site.admin, {"id": project}, (201, 409))
    panel.login("operator")
    panel.open("/tokens", "tokens")
    scopes = panel.read(lambda: [o.get_attribute("value")
                                 for o in panel.css("#token-scope option")])
    assert scopes == ["read", "operate"], scopes  # no wider than the role
    assert panel.shown("#token-owner") == 0  # only admins make tokens for others
    panel.fill("token-name", "backup script")
    panel.by_id("token-scope").send_keys("operate")
    panel.fill("token-expires", "30d")
    panel.fill("token-projects", "tok-a, tok-b")
    panel.by_id("token-create-submit").click()
    panel.until(lambda d: panel.shown("#token-secret") == 1, "the secret")
    secret = str(panel.by_id("token-secret-value").get_attribute("value"))
    assert secret.startswith("qlt_"), secret
    panel.by_id("token-copy").click()
    said = panel.until(lambda d: panel.text("token-copy-result"), "the copy")
    assert said in ("Copied.", "Selected: copy it with Ctrl+C."), said
    token_id = secret.split("_")[1]
    row = panel.until(lambda d: _row(panel, "tokens", "data-token", token_id), "its row")
    assert row[1:6] == ["backup script", "operator", "operate", "active", "tok-a, tok-b"], row
    assert row[7] != "never"  # it expires
    who = site.http.ok("GET", "/api/v1/me", Auth(token=secret))
    assert (who["username"], who["token_scope"], who["token_projects"]) == (
        "operator", "operate", ["tok-a", "tok-b"])
    # shown once: a reload has the row, never the secret
    panel.open("/tokens", "tokens")
    panel.until(lambda d: _row(panel, "tokens", "data-token", token_id), "its row again")
    assert secret.split("_", 2)[2] not in panel.d.page_source  # (the secret may hold "_")
    assert panel.shown("#token-secret") == 0
    # a bad expiry is refused beside the form, nothing made
    before = len(site.http.ok("GET", "/api/v1/tokens", Auth(token=secret)))
    panel.fill("token-name", "bad")
    panel.fill("token-expires", "soon")
    panel.by_id("token-create-submit").click()
    said = panel.until(lambda d: panel.text("token-create-problem"), "the refusal")
    assert "Expires in" in said and "not a duration" in said, said
    assert len(site.http.ok("GET", "/api/v1/tokens", Auth(token=secret))) == before


def test_revoking_asks_first_and_the_token_is_then_refused(panel: Panel, site: Site) -> None:
    made = site.http.ok("POST", "/api/v1/tokens", site.admin,
                        {"name": "to revoke", "scope": "read", "username": "operator"}, (201,))
    panel.login("operator")
    panel.open("/tokens", "tokens")
    selector = f'button[data-revoke="{made["id"]}"]'
    panel.click(selector, "Revoke")
    panel.click(f'tr[data-token="{made["id"]}"] .confirm-no', "No")
    assert site.http.call("GET", "/api/v1/session", auth=Auth(token=made["token"])).status == 200
    panel.click(selector, "Revoke")
    panel.click(f'tr[data-token="{made["id"]}"] .confirm-yes', "Yes")
    panel.until(lambda d: _row(panel, "tokens", "data-token", made["id"])[4] == "revoked",
                "the token revoked")
    assert "Revoked to revoke" in panel.text("tokens-result")
    assert site.http.call("GET", "/api/v1/session", auth=Auth(token=made["token"])).status == 401
    assert not panel.css(selector)  # a revoked token has no Revoke


def test_an_admin_makes_a_token_for_another_user_and_lists_everyones(panel: Panel,
                                                                   site: Site) -> None:
    panel.login("admin")
    panel.open("/tokens", "tokens")
    assert panel.read(lambda: [o.get_attribute("value")
                               for o in panel.css("#token-scope option")]) == [
        "read", "operate", "admin"]
    panel.fill("token-name", "viewer's reader")
    panel.fill("token-owner", "viewer")
    panel.by_id("token-scope").send_keys("admin")
    panel.by_id("token-create-submit").click()  # wider than the viewer's role: refused
    refused = panel.until(lambda d: panel.text("token-create-problem"), "the refusal")
    assert "scope" in refused.lower(), refused
    assert panel.shown("#token-secret") == 0
    panel.by_id("token-scope").send_keys("read")
    panel.by_id("token-create-submit").click()
    panel.until(lambda d: panel.shown("#token-secret") == 1, "the secret")
    secret = str(panel.by_id("token-secret-value").get_attribute("value"))
    token_id = secret.split("_")[1]
    assert not _row(panel, "tokens", "data-token", token_id)  # the admin's own list
    panel.by_id("token-all").click()
    row = panel.until(lambda d: _row(panel, "tokens", "data-token", token_id), "everyone's")
    assert row[2:4] == ["viewer", "read"], row
    assert site.http.ok("GET", "/api/v1/session", Auth(token=secret))["username"] == "viewer"


def test_a_viewer_makes_only_read_tokens_of_their_own(panel: Panel, site: Site) -> None:
    panel.login("viewer")
    panel.open("/tokens", "tokens")
    assert panel.read(lambda: [o.get_attribute("value")
                               for o in panel.css("#token-scope option")]) == ["read"]
    assert panel.shown("#token-owner") == 0 and panel.shown("#token-all") == 0
    viewer_token = site.people.token_ids["viewer"]
    panel.until(lambda d: _row(panel, "tokens", "data-token", viewer_token), "their token")
    others = [r for r in panel.rows("tokens") if len(r) > 2 and r[2] != "viewer"]
    assert others == []
