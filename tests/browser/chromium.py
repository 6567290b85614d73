"""Debian's chromium and chromedriver for the browser suite: installed with apt-get when
missing (as root; a failure fails the suite, it never skips it), then started headless with a
fresh profile. Without the background-networking flags chromium keeps trying the network,
which the closed test network refuses."""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
PACKAGES = ("chromium", "chromium-driver")
LOCK = Path("/tmp/ql-apt-install.lock")  # also taken by tests/support/tools.py (apt-get)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--lang=en-US", "--window-size=1400,1000")


def _apt(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=600", *args],
                          capture_output=True, text=True, timeout=900,
                          check=False, env=env)


def ensure_chromium() -> None:
    """Install chromium and chromium-driver unless both are there."""
    if CHROMIUM.exists() and CHROMEDRIVER.exists():
        return
    if os.geteuid() != 0:
        pytest.fail(f"the browser suite needs {CHROMIUM} and {CHROMEDRIVER}: run it as root (it "
                    "installs them) or run `apt-get install -y chromium chromium-driver`")
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two pytest workers must not run apt-get at once
        if CHROMIUM.exists() and CHROMEDRIVER.exists():
            return
        done = _apt("install", "-y", *PACKAGES)
        if done.returncode != 0:  # an empty or stale package list: update it once, then retry
            updated = _apt("update")
            done = _apt("install", "-y", *PACKAGES)
            if done.returncode != 0:
                pytest.fail("could not install chromium and chromium-driver with apt-get:\n"
                            f"apt-get update exited {updated.returncode}: "
                            f"{updated.stderr[-1500:]}\napt-get install exited "
                            f"{done.returncode}: {done.stdout[-1500:]}{done.stderr[-2500:]}")
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.fail(f"apt-get installed the packages but {CHROMIUM} or {CHROMEDRIVER} is missing")


def start_chromium(profile: Path, *, timezone: str) -> webdriver.Chrome:
    """Headless chromium through chromedriver, in ``timezone`` (the viewer's zone)."""
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    env = {**os.environ, "TZ": timezone, "LANG": "en_US.UTF-8"}
    service = Service(executable_path=str(CHROMEDRIVER), env=env,
                      log_output=str(profile.parent / f"{profile.name}-chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(30)
    return driver
