"""The dependency installer: the command of an install Run, and the wrapper a script Run
of a project with a dependency set starts through (docs/dependencies.md).

    python -m qinglong.execution.deps_install --cache DIR --digest D --revision N
        [--python SPEC]... [--node SPEC]... [-- COMMAND...]

For each language the set names it makes sure ``DIR/<language>/<digest>`` exists: under an
exclusive lock on ``DIR/<language>/<digest>.lock`` (a second Run of the same set on this
host waits for the first, then finds its work done), it builds the environment in a new
directory ``.build-<digest>-*`` -- ``python3 -m venv`` and ``pip install``, or ``npm
install --prefix`` -- and only when that succeeded points the symbolic link ``<digest>`` at
it (an atomic rename). A failed or interrupted build is removed and never linked, so a
half-built environment is never used and the environment of the previous set, under its
own digest, keeps serving. Every specifier is one argument of an argv list: nothing passes
through a shell.

With a COMMAND (a script Run) it then executes it in the environment: the venv's ``bin``
and the packages' ``node_modules/.bin`` first on PATH (so ``python3`` is the venv's),
VIRTUAL_ENV set, NODE_PATH naming ``node_modules``. A build that fails leaves
``<digest>.failed``: script Runs do not try that set again (an install Run does, and clears
the mark when it succeeds) and run in the environment of the newest earlier set this host
has (``--fallback DIGEST:REVISION:LANGUAGES``, newest first), saying so. It exits 125 when
the set cannot be installed and there is nothing to fall back to (what pip or npm said is in
the log above), 127 when COMMAND cannot be executed.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from qinglong.domain.deps import check_node, check_python, digest_of

INSTALL_FAILED = 125
NOT_EXECUTABLE = 127


class InstallFailed(Exception):
    pass


def say(message: str) -> None:
    print(f"[qinglong: {message}]", flush=True)


def _run(argv: list[str], env: dict[str, str]) -> None:
    sys.stdout.flush()
    try:
        done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, check=False)
    except OSError as exc:
        raise InstallFailed(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        raise InstallFailed(f"{' '.join(argv[:4])} ... exited with {done.returncode}")


def build_python(target: Path, specs: Sequence[str], env: dict[str, str]) -> None:
    python = shutil.which("python3", path=env.get("PATH")) or "python3"
    _run([python, "-m", "venv", str(target)], env)
    _run([str(target / "bin" / "python"), "-m", "pip", "install", "--no-input",
          "--disable-pip-version-check", *specs], {**env, "VIRTUAL_ENV": str(target)})


def build_node(target: Path, specs: Sequence[str], env: dict[str, str]) -> None:
    npm = shutil.which("npm", path=env.get("PATH")) or "npm"
    (target / "package.json").write_text('{"name": "ql-deps", "private": true}\n')
    _run([npm, "install", "--prefix", str(target), "--no-audit", "--no-fund",
          "--no-update-notifier", *specs], env)


def ensure(root: Path, digest: str, what: str,
           build: Callable[[Path], None]) -> tuple[Path, bool]:
    """``root/<digest>``, built first when it is not there; whether this call built it."""
    link = root / digest
    if link.exists():
        return link, False
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{digest}.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"{what}: another Run is installing this set on this host; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if link.exists():
            say(f"{what}: installed meanwhile by another Run")
            return link, False
        for stale in root.glob(f".build-{digest}-*"):  # left by a build that was killed
            shutil.rmtree(stale, ignore_errors=True)
        target = Path(tempfile.mkdtemp(prefix=f".build-{digest}-", dir=root))
        target.chmod(0o755)  # as a directory the installer would make (mkdtemp's is 0700)
        try:
            build(target)
            pending = root / f".link-{digest}-{os.getpid()}"
            pending.unlink(missing_ok=True)
            os.symlink(target.name, pending)
            os.replace(pending, link)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
    return link, True


def _install(cache: Path, digest: str, short: str, sets: dict[str, list[str]],
             env: dict[str, str], script: bool) -> dict[str, Path]:
    """Each language's environment of the set, built where it is missing (InstallFailed
    when one cannot be; a script Run does not try again a set an install failed to build
    on this host: ``<digest>.failed`` marks it until an install Run succeeds)."""
    paths: dict[str, Path] = {}
    builders = {"python": build_python, "node": build_node}
    for language, specs in sets.items():
        root = cache / language
        marker = root / f"{digest}.failed"
        if script and not (root / digest).exists():
            if marker.exists():
                raise InstallFailed(f"{language} dependencies of {short} failed to install on "
                                    "this host (ql deps install tries again)")
            say(f"{language} dependencies of {short} are not installed on this host: "
                "installing them first")
        elif not script:
            say(f"{language}: {' '.join(specs)} ({short})")
        build = builders[language]
        try:
            paths[language], built = ensure(root, digest, language,
                                            lambda target, s=specs, b=build: b(target, s, env))  # type: ignore[misc]
        except (InstallFailed, OSError) as exc:
            with contextlib.suppress(OSError):
                marker.write_text(f"{exc}\n")
            raise InstallFailed(str(exc)) from None
        marker.unlink(missing_ok=True)
        if built or not script:
            say(f"{language} dependencies {'installed' if built else 'already installed'} "
                f"at {paths[language]}")
    return paths


def _fallback(cache: Path, fallbacks: Sequence[str]) -> tuple[str, dict[str, Path]] | None:
    """The newest earlier set whose environments this host has (``DIGEST:REVISION:LANGS``,
    newest first)."""
    for item in fallbacks:
        digest, revision, languages = item.split(":", 2)
        paths = {language: cache / language / digest for language in languages.split("+")
                 if language}
        if paths and all(path.exists() for path in paths.values()):
            return f"r{revision} sha256 {digest[:12]}", paths
    return None


def main(arguments: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if arguments is None else arguments)
    then: list[str] = []
    if "--" in args:
        at = args.index("--")
        args, then = args[:at], args[at + 1:]
    parser = argparse.ArgumentParser(prog="deps_install")
    parser.add_argument("--cache", required=True)
    parser.add_argument("--digest")
    parser.add_argument("--revision")
    parser.add_argument("--python", action="append", default=[])
    parser.add_argument("--node", action="append", default=[])
    parser.add_argument("--fallback", action="append", default=[])
    found = parser.parse_args(args)
    python = [check_python(s)[1] for s in found.python]
    node = [check_node(s)[1] for s in found.node]
    env = dict(os.environ)
    if found.digest is None:
        say("the project has no dependency set: nothing to install (ql deps add)")
        return 0
    if digest_of(python, node) != found.digest:
        say("DEPS_INSTALL_FAILED: the set does not match its digest")
        return INSTALL_FAILED
    cache, digest = Path(found.cache), found.digest
    short = f"set r{found.revision} sha256 {digest[:12]}"
    sets = {language: specs for language, specs in (("python", python), ("node", node))
            if specs}
    try:
        paths = _install(cache, digest, short, sets, env, bool(then))
    except InstallFailed as exc:
        earlier = _fallback(cache, found.fallback) if then else None
        if earlier is None:
            say(f"DEPS_INSTALL_FAILED: {exc}; the environment of {short} was not made (an "
                "earlier set's keeps serving)")
            return INSTALL_FAILED
        say(f"{exc}: running in the environment of the earlier set {earlier[0]}")
        paths = earlier[1]
    if not then:
        return 0
    if "python" in paths:
        env["VIRTUAL_ENV"] = str(paths["python"])
        env["PATH"] = f"{paths['python'] / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    if "node" in paths:
        modules = paths["node"] / "node_modules"
        env["PATH"] = f"{modules / '.bin'}{os.pathsep}{env.get('PATH', '')}"
        env["NODE_PATH"] = os.pathsep.join(p for p in (str(modules), env.get("NODE_PATH"))
                                           if p)
    sys.stdout.flush()
    try:
        os.execvpe(then[0], then, env)  # noqa: S606 - an argv, no shell
    except OSError as exc:
        say(f"cannot execute {then[0]!r}: {exc.strerror or exc}")
    return NOT_EXECUTABLE


if __name__ == "__main__":
    sys.exit(main())
