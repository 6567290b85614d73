"""Operating-system tools some tests need (faketime, iptables...): found, or installed
when we are root, or a clear failure -- never a silent skip."""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import subprocess
from pathlib import Path

APT_LOCK = Path("/tmp/ql-apt-install.lock")  # shared with tests/browser/chromium.py


@functools.cache
def ensure_tool(binary: str, package: str) -> str:
    found = shutil.which(binary)
    if found:
        return found
    if os.geteuid() != 0:
        raise RuntimeError(f"{binary} is missing and we are not root: install the Debian package "
                           f"{package!r} to run this test")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # Other pytest workers may be installing too (faketime here, chromium in the browser
    # suite): one apt-get at a time (the same lock file), and apt itself waits for dpkg's lock
    # rather than failing at once if something else holds it.
    install = ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y",
               "--no-install-recommends", package]
    with APT_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = shutil.which(binary)  # installed by another worker meanwhile
        if found:
            return found
        done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=900,
                              check=False)
        if done.returncode != 0:
            subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=600", "update"], env=env,
                           capture_output=True, timeout=900, check=False)
            done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=900,
                                  check=False)
    found = shutil.which(binary)
    if not found:
        raise RuntimeError(f"could not install {package!r} for {binary}: {done.stderr[-500:]}")
    return found


def libfaketime(skew: str) -> dict[str, str]:
    """Environment that runs a process with its wall clock shifted by ``skew`` (e.g. "+1h").

    The library is preloaded directly (the `faketime` wrapper would sit between us and the
    process and swallow our signals). The monotonic clock stays real: it only measures
    durations, and libfaketime 0.9.10 makes Python's timed waits hang when it fakes it.
    """
    ensure_tool("faketime", "faketime")
    done = subprocess.run(["dpkg", "-L", "libfaketime"], capture_output=True, text=True, check=True)
    library = next(line for line in done.stdout.splitlines() if line.endswith("/libfaketime.so.1"))
    return {"LD_PRELOAD": library, "FAKETIME": skew, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
