"""Fetching a subscription's repository with the git command line (docs/subscriptions.md).

Each pull clones the branch afresh into a temporary directory (one commit deep), so a
force-push, a rename or a rewritten history needs nothing special: what the branch holds now
is what is read. git never asks a question (no terminal prompt); a token is handed to git in
its environment (``GIT_CONFIG_*``), never on a command line, and an ssh key is written to a
private file for the clone's length only.
"""

from __future__ import annotations

import base64
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from qinglong.domain.repos import RepoSpec
from qinglong.domain.scripts import MAX_SCRIPT_BYTES
from qinglong.errors import InvalidInput
from qinglong.errors import RepoFetchFailed as FetchFailed

CLONE_TIMEOUT_S = 600
MAX_FILES = 20_000
SYMLINK_MODE = "120000"


@contextmanager
def _credentials(spec: RepoSpec, environ: Mapping[str, str]) -> Iterator[dict[str, str]]:
    env = {name: environ[name] for name in ("PATH", "HOME", "LANG", "TZ") if name in environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    # no prompt, and nothing of the host's git configuration (its stored credentials
    # included): a pull uses the credential its subscription names, or none
    env.update(GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null",
               GIT_LFS_SKIP_SMUDGE="1")
    if spec.token_env is not None:
        token = environ.get(spec.token_env)
        if not token:
            raise InvalidInput("token-env", f"the project's environment gives no "
                                            f"{spec.token_env}: set it with ql env set")
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        env.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="http.extraHeader",
                   GIT_CONFIG_VALUE_0=f"Authorization: Basic {basic}")
    if spec.ssh_key_env is None:
        yield env
        return
    key = environ.get(spec.ssh_key_env)
    if not key:
        raise InvalidInput("ssh-key-env", f"the project's environment gives no "
                                          f"{spec.ssh_key_env}: set it with ql env set")
    with tempfile.TemporaryDirectory(prefix="ql-key-") as folder:
        path = Path(folder) / "key"
        path.touch(mode=0o600)
        path.write_text(key if key.endswith("\n") else key + "\n")
        env["GIT_SSH_COMMAND"] = (f"ssh -i {path} -o IdentitiesOnly=yes -o BatchMode=yes "
                                  "-o StrictHostKeyChecking=accept-new")
        yield env


def _git(args: list[str], env: Mapping[str, str], say: Callable[[str], None],
         cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(["git", *args], env=dict(env), cwd=cwd, capture_output=True,
                              timeout=CLONE_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise FetchFailed("git is not installed on this host") from None
    except subprocess.TimeoutExpired:
        raise FetchFailed(f"git {args[0]} took longer than {CLONE_TIMEOUT_S} s") from None
    errors = done.stderr.decode("utf-8", "replace").strip()
    if done.returncode != 0:
        hint = ""
        if "could not read Username" in errors or "Authentication failed" in errors:
            hint = (" (the repository asks for credentials: name a token with --token-env, "
                    "or check the one named)")
        raise FetchFailed(f"git {args[0]} failed: {errors or f'exit {done.returncode}'}{hint}")
    if errors:
        for line in errors.splitlines():
            say(f"git: {line}")
    return done.stdout.decode("utf-8", "replace")


@contextmanager
def checkout(spec: RepoSpec, environ: Mapping[str, str],
             say: Callable[[str], None]) -> Iterator[tuple[Path, str]]:
    """The branch cloned into a temporary directory, and its commit (removed afterwards)."""
    with _credentials(spec, environ) as env, \
            tempfile.TemporaryDirectory(prefix="ql-repo-") as folder:
        root = Path(folder) / "repo"
        url = spec.url
        if url.startswith("/"):
            url = "file://" + url  # so --depth applies to a local repository too
        say(f"cloning {spec.url} (branch {spec.branch})")
        _git(["clone", "--quiet", "--depth", "1", "--single-branch", "--no-tags", "--branch",
              spec.branch, "--", url, str(root)], env, say)
        commit = _git(["rev-parse", "HEAD"], env, say, cwd=root).strip()
        yield root, commit


def tracked_files(root: Path, environ: Mapping[str, str],
                  say: Callable[[str], None]) -> Iterator[tuple[str, bytes | str]]:
    """Each file git tracks at the commit, with its bytes -- or, for a file that cannot be
    read as a script, why: a symbolic link (never followed), a file too large to be one (read
    no further than the limit), a file that cannot be read."""
    env = {"PATH": environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1"}
    listing = _git(["ls-files", "-s", "-z"], env, say, cwd=root)
    entries = [e for e in listing.split("\0") if e]
    if len(entries) > MAX_FILES:
        raise FetchFailed(f"the repository tracks {len(entries):,} files; a subscription "
                          f"reads at most {MAX_FILES:,}")
    for entry in entries:
        meta, _, path = entry.partition("\t")
        if meta.split(" ", 1)[0] == SYMLINK_MODE:
            yield path, "is a symbolic link (not followed)"
            continue
        try:
            with open(root / path, "rb") as handle:
                content = handle.read(MAX_SCRIPT_BYTES + 1)
        except OSError as exc:
            yield path, f"cannot be read ({exc.strerror or exc})"
            continue
        if len(content) > MAX_SCRIPT_BYTES:
            yield path, f"is larger than a script may be ({MAX_SCRIPT_BYTES:,} bytes)"
            continue
        yield path, content


def environment() -> dict[str, str]:
    """This process's environment (a pull Run's: the project's entries are in it)."""
    return dict(os.environ)
