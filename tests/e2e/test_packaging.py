"""What `pip install qinglong` ships: the product, and none of the test harness."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.ql import Ql

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ("pgproxy", "netns", "replication", "soak", "replica")


def test_the_wheel_ships_no_fault_injection_machinery(tmp_path: Path) -> None:
    # built from a copy of what git tracks: a build/ directory left in the checkout keeps
    # modules that were removed since, and the wheel would ship them
    source = tmp_path / "source"
    source.mkdir()
    tracked = subprocess.run(["git", "ls-files", "-z", "src", "pyproject.toml", "README.md"],
                             cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, tracked):
        target = source / name.decode()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name.decode(), target)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--quiet", "--wheel-dir", str(tmp_path), str(source)],
        capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = tmp_path.glob("qinglong-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    modules = sorted(n.removesuffix(".py").replace("/", ".") for n in names if n.endswith(".py"))
    assert modules, names
    assert all(m.startswith("qinglong.") or m == "qinglong.__init__" for m in modules), modules
    assert [m for m in modules if any(part in m.split(".") for part in HARNESS)] == []
    assert not [m for m in modules if m.startswith("testkit")]
    assert "qinglong.testing.clock" in modules  # the small helper users import stays
    assert [m for m in modules if m.startswith("qinglong.testing.")] == ["qinglong.testing.__init__",
                                                                         "qinglong.testing.clock"]
    # the SQL files the adapters load are in the wheel
    assert "qinglong/storage/postgres/queries/lifecycle.sql" in names
    assert "qinglong/storage/common/queries/columns.sql" in names  # fragments both include
    assert "qinglong/storage/sqlite/migrations/0002_lifecycle.sql" in names


def test_control_help_shows_no_test_option(tmp_path: Path) -> None:
    done = Ql("sqlite:///unused.db", cwd=tmp_path).run("control", "--help")
    # none of the seams testkit.replica wires in (its help says "a name a live process
    # holds", so the seam options are looked for by name)
    assert "--test" not in done.stdout and "--hold" not in done.stdout
    assert "hold-fraction" not in done.stdout and "pause-after-claim" not in done.stdout
    assert "ledger" not in done.stdout
    assert "--owner-id" in done.stdout
