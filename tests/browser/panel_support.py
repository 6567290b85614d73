"""What the browser tests share: the site under test (`ql serve --http` on a fresh SQLite file,
with a viewer, an operator and an admin), and ``Panel``: the browser on the panel with the
waits, table reads and screenshots a test needs. The fixtures that make them are in
conftest.py."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from qinglong.clock import SystemClock
from qinglong.storage.sqlite.connection import SqliteDatabase
from qinglong.storage.sqlite.migrate import migrate
from tests.support.test_api_support import (
    PASSWORD,
    Auth,
    Http,
    People,
    Server,
    make_people,
    start_server,
)

VIEWER_ZONE = "Asia/Shanghai"
ARTIFACTS = Path(os.environ.get("QL_BROWSER_ARTIFACTS",
                                Path(__file__).resolve().parent / "artifacts"))
UTC_TEXT = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC$")
T = TypeVar("T")


@dataclass
class Site:
    base: str
    server: Server
    people: People

    @property
    def http(self) -> Http:
        return self.server.http

    @property
    def admin(self) -> Auth:
        return self.people.tokens["admin"]


def migrated_sqlite(folder: Path) -> str:
    """The URL of a fresh, migrated SQLite file in ``folder``."""
    path = folder / "ql.db"
    db = SqliteDatabase(path, create=True)
    try:
        migrate(db, SystemClock())
    finally:
        db.close()
    return f"sqlite:///{path}"


@contextmanager
def serving(folder: Path, url: str, *extra: str) -> Iterator[Site]:
    """`ql serve --http` on ``url`` (its options ``extra``), with a viewer, an operator and an
    admin; stopped, and checked to stop cleanly, at the end."""
    people = make_people(url)
    server = start_server(["serve", "--database-url", url, "--http", "127.0.0.1:0", *extra],
                          folder / "serve.log")
    try:
        yield Site(f"http://127.0.0.1:{server.port}", server, people)
    finally:
        assert server.stop() == 0, server.log.read_text()


class Panel:
    """The browser on the panel, and the waits and screenshots a test needs."""

    def __init__(self, driver: webdriver.Chrome, site: Site, name: str) -> None:
        self.d = driver
        self.site = site
        self.name = name

    # --- navigation ---------------------------------------------------------------------------

    def open(self, path: str, page: str) -> None:
        self.d.get(self.site.base + path)
        self.ready(page)

    def ready(self, page: str, timeout: float = 20) -> None:
        """The page ``page`` is loaded and its script has run."""
        self.until(lambda d: d.execute_script(
            "return document.body && document.body.getAttribute('data-page') === arguments[0] "
            "&& document.body.getAttribute('data-ready') === 'true'", page),
            f"page {page} ready", timeout)

    def login(self, username: str, password: str = PASSWORD) -> None:
        self.d.delete_all_cookies()
        self.open("/login", "login")
        self.fill("login-username", username)
        self.fill("login-password", password)
        self.by_id("login-submit").click()
        self.until(lambda d: d.execute_script(
            "return document.body.getAttribute('data-page') !== 'login' && "
            "document.body.getAttribute('data-ready') === 'true'"), "logged in")
        assert self.by_id("who").text == username

    # --- elements -----------------------------------------------------------------------------

    def by_id(self, element_id: str) -> WebElement:
        return self.d.find_element(By.ID, element_id)

    def css(self, selector: str) -> list[WebElement]:
        return self.d.find_elements(By.CSS_SELECTOR, selector)

    def fill(self, element_id: str, text: str) -> None:
        field = self.by_id(element_id)
        field.clear()
        field.send_keys(text)

    def text(self, element_id: str) -> str:
        return str(self.d.execute_script(
            "var n = document.getElementById(arguments[0]); return n ? n.textContent : ''",
            element_id))

    def until(self, condition: Callable[[webdriver.Chrome], T], what: str,
              timeout: float = 20) -> T:
        def check(d: webdriver.Chrome) -> T | bool:
            try:
                return condition(d)
            except StaleElementReferenceException:
                return False  # the page redrew meanwhile: look again

        try:
            wait = WebDriverWait(self.d, timeout, poll_frequency=0.1)
            return wait.until(check)  # type: ignore[arg-type, return-value]
        except TimeoutException:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} on "
                                 f"{self.d.current_url}") from None

    def read(self, look: Callable[[], T], timeout: float = 20) -> T:
        """What ``look`` reads from elements it finds, read again when the page redrew between
        finding an element and reading it (a stale element); unlike ``until``, any value,
        empty or not, is the answer."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return look()
            except StaleElementReferenceException:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)

    def choose(self, select_id: str, value: str) -> None:
        """Choose ``value`` in the <select> ``select_id`` once the page has filled it in
        (a page fills its project list after it is ready: typing before that chooses
        nothing)."""
        self.until(lambda d: self.css(f'#{select_id} option[value="{value}"]'),
                   f"the option {value!r} of #{select_id}")
        self.by_id(select_id).send_keys(value)
        self.until(lambda d: self.by_id(select_id).get_attribute("value") == value,
                   f"{value!r} chosen in #{select_id}")

    def shown(self, selector: str) -> int:
        """How many elements ``selector`` finds are displayed, counted in one step (a page
        that redraws cannot leave a stale element behind)."""
        count = self.d.execute_script(
            "return Array.prototype.filter.call(document.querySelectorAll(arguments[0]),"
            " function (n) { return n.getClientRects().length > 0 &&"
            " getComputedStyle(n).visibility !== 'hidden'; }).length;", selector)
        assert isinstance(count, int)
        return count

    def click(self, selector: str, what: str, timeout: float = 20) -> None:
        """Click the first element ``selector`` finds, once there is one and no table is
        being drawn again (``aria-busy``: a control clicked then is replaced, its confirmation
        with it); found and clicked in one step, and again if the page redrew it in between
        (a stale element)."""
        def found_and_clicked(d: webdriver.Chrome) -> bool:
            if self.css('[aria-busy="true"]'):
                return False
            elements = self.css(selector)
            if not elements:
                return False
            elements[0].click()
            return True

        self.until(found_and_clicked, what, timeout)

    def details(self, element_id: str) -> dict[str, str]:
        """A description list's terms and descriptions, read in one call: the page may redraw
        between two reads, and an element found before a redraw is stale after it."""
        found = self.d.execute_script(
            "var n = document.getElementById(arguments[0]);"
            "function texts(tag) { return n ? Array.prototype.map.call("
            "  n.getElementsByTagName(tag), function (e) { return e.innerText.trim(); }) : []; }"
            "return [texts('dt'), texts('dd')];", element_id)
        assert isinstance(found, list) and len(found) == 2, found
        terms, descriptions = found
        return dict(zip([str(t) for t in terms], [str(d) for d in descriptions], strict=True))

    def rows(self, table_id: str) -> list[list[str]]:
        found = self.d.execute_script(
            "var t = document.getElementById(arguments[0]);"
            "return Array.prototype.map.call(t.tBodies[0].rows, function (r) {"
            "  return Array.prototype.map.call(r.cells, function (c) { return c.textContent; });"
            "});", table_id)
        assert isinstance(found, list)
        return [[str(cell) for cell in row] for row in found]

    # --- artifacts ----------------------------------------------------------------------------

    def shot(self, step: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.name}-{step}.png"
        assert self.d.save_screenshot(str(path)), path
        return path

    def leave_evidence(self) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.d.save_screenshot(str(ARTIFACTS / f"{self.name}-FAILED.png"))
        (ARTIFACTS / f"{self.name}-FAILED.html").write_text(self.d.page_source)
        console = "\n".join(f"{e.get('level')} {e.get('message')}"
                            for e in self.d.get_log("browser"))
        (ARTIFACTS / f"{self.name}-FAILED-console.txt").write_text(console)


def publish_shell_task(site: Site, project: str, task: str, command: str) -> None:
    site.http.ok("POST", "/api/v1/projects", site.admin, {"id": project}, (201, 409))
    site.http.ok("POST", f"/api/v1/projects/{project}/tasks/{task}/revisions", site.admin,
                 {"command": {"kind": "shell", "command": command}}, (200, 201))


def utc_instant(text: str) -> datetime:
    found = UTC_TEXT.match(text.strip())
    assert found, text
    return datetime.fromisoformat(found.group(1) + "+00:00")
