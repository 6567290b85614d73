"""The script editor in the panel (issue 22, item 1), in a real browser against `ql serve
--http`: an admin opens a script and sees it highlighted with line numbers, edits it, sees the
diff against the revision its task runs, saves (the task moves onto the new content, which
then runs), and a save from a stale editor is refused rather than overwriting; a viewer reads
the script with no write control; a path is text, never markup."""

from __future__ import annotations

import hashlib

import pytest

from tests.browser.panel_support import Panel, Site

pytestmark = pytest.mark.slow

SCRIPT = "import sys\n# greet someone\nprint('hello', 42)\n"


def _seed(site: Site, project: str, path: str, content: str = SCRIPT) -> None:
    site.http.ok("POST", "/api/v1/projects", site.admin, {"id": project}, (201, 409))
    site.http.ok("PUT", f"/api/v1/projects/{project}/scripts/content", site.admin,
                 {"path": path, "content": content}, (200, 201))


def _open(panel: Panel, project: str, path: str) -> None:
    panel.open("/scripts", "scripts")
    panel.choose("scripts-project", project)
    panel.click(f'#scripts a[data-path="{path}"]', "the script")
    panel.until(lambda d: panel.text("script-path") == f"{project}/{path}", "the editor")


def _texts(panel: Panel, selector: str) -> list[str]:
    """The text of every element ``selector`` finds, read in one step (the editor repaints)."""
    found = panel.d.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll(arguments[0]),"
        " function (n) { return n.textContent; });", selector)
    assert isinstance(found, list)
    return [str(text) for text in found]


def _task_digest(site: Site, project: str, task: str) -> str:
    shown = site.http.ok("GET", f"/api/v1/projects/{project}/tasks/{task}", site.admin)
    return str(shown["command"]["digest"])


def test_an_admin_edits_diffs_and_saves_and_the_task_follows(panel: Panel, site: Site) -> None:
    _seed(site, "edit", "jobs/greet.py")
    site.http.ok("POST", "/api/v1/projects/edit/tasks/greet/revisions", site.admin,
                 {"command": {"kind": "script", "path": "jobs/greet.py"}}, (200, 201))
    panel.login("admin")
    _open(panel, "edit", "jobs/greet.py")
    assert panel.text("script-revision").strip() == "revision 1"
    assert panel.text("script-gutter") == "1\n2\n3\n4"
    assert _texts(panel, "#script-highlight .tok-keyword") == ["import"]
    assert _texts(panel, "#script-highlight .tok-comment") == ["# greet someone"]
    assert _texts(panel, "#script-highlight .tok-string") == ["'hello'"]
    assert _texts(panel, "#script-highlight .tok-number") == ["42"]
    editor = panel.by_id("script-text")
    editor.send_keys("print('bye')\n")  # the caret starts at the top: a new first line
    panel.by_id("script-diff").click()
    added = panel.until(lambda d: _texts(panel, "#script-diff-view .diff-add"), "the diff")
    assert added == ["+ print('bye')\n"], added
    assert not panel.css("#script-diff-view .diff-del")
    panel.shot("script-diff")
    panel.by_id("script-save").click()
    note = panel.until(lambda d: panel.text("script-result") or False, "the save's answer")
    assert "Saved revision 2" in note and "Tasks now running it: greet" in note, note
    content = panel.by_id("script-text").get_attribute("value")
    assert _task_digest(site, "edit", "greet") == hashlib.sha256(
        str(content).encode()).hexdigest()
    panel.until(lambda d: len(panel.rows("script-history")) == 2, "two revisions")
    # someone else saves meanwhile: this editor's next save is refused, nothing overwritten
    site.http.ok("PUT", "/api/v1/projects/edit/scripts/content", site.admin,
                 {"path": "jobs/greet.py", "content": "print('theirs')\n"}, (201,))
    editor.send_keys("# mine\n")
    panel.by_id("script-save").click()
    refused = panel.until(lambda d: panel.css("#script-result .problem"), "the refusal")
    assert "revision 3, not 2" in refused[0].text, refused[0].text
    shown = site.http.ok("GET", "/api/v1/projects/edit/scripts/content?path=jobs/greet.py",
                         site.admin)
    assert shown["content"] == "print('theirs')\n"


def test_a_viewer_reads_a_script_with_no_write_control(panel: Panel, site: Site) -> None:
    _seed(site, "look", "<b>bold</b>.sh", "echo $HOME # where\n")
    panel.login("viewer")
    _open(panel, "look", "<b>bold</b>.sh")
    assert not panel.css("#scripts b") and not panel.css("#script-path b")
    assert panel.by_id("script-text").get_attribute("readonly") is not None
    for control in ("script-save", "script-remove", "script-new"):
        assert not panel.by_id(control).is_displayed(), control
    assert _texts(panel, "#script-highlight .tok-variable") == ["$HOME"]
    assert panel.by_id("script-diff").is_displayed()
