"""Operating-system tools some tests need (faketime, iptables...): found, or installed
when we are root, or a clear failure -- never a silent skip."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess


@functools.cache
def ensure_tool(binary: str, package: str) -> str:
    found = shutil.which(binary)
    if found:
        return found
    if os.geteuid() != 0:
        raise RuntimeError(f"{binary} is missing and we are not root: install the Debian package "
                           f"{package!r} to run this test")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", package]
    done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600, check=False)
        done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600,
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
