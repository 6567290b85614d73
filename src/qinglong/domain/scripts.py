"""Scripts: a project's files, each save an immutable revision named by the SHA-256 of its
bytes (docs/scripts.md).

A path is relative, with ``/`` between its parts (``jd/daily_sign.py``); no part is empty,
``.`` or ``..``, and none holds a control character or a backslash. Content is UTF-8 text
without NUL bytes, at most ``MAX_SCRIPT_BYTES``: a script is read by an interpreter and shown
in an editor, so a binary file is refused with the reason. The interpreter follows the
extension unless a task names one.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import StrEnum

from qinglong.errors import InvalidInput, RecordCorrupt

MAX_SCRIPT_BYTES = 1024 * 1024
MAX_PATH_BYTES = 512
MAX_PATH_PARTS = 16
MAX_SOURCE = 160
DIGEST = re.compile(r"^[0-9a-f]{64}$")
_BAD_PART_CHARS = re.compile(r"[\x00-\x1f\x7f\\]")


class Interpreter(StrEnum):
    """What runs a script: the program, looked up on the command's PATH."""

    PYTHON3 = "python3"
    NODE = "node"
    BASH = "bash"
    SH = "sh"


BY_EXTENSION = {".py": Interpreter.PYTHON3, ".js": Interpreter.NODE, ".mjs": Interpreter.NODE,
                ".cjs": Interpreter.NODE, ".sh": Interpreter.BASH}


def known_interpreters() -> str:
    return ", ".join(i.value for i in Interpreter)


def check_path(path: object, field: str = "path") -> str:
    """A script's path in its project (InvalidInput on ``field`` with the rule broken)."""
    if not isinstance(path, str) or not path:
        raise InvalidInput(field, "must be a relative path such as jd/sign.py")
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise InvalidInput(field, f"must be at most {MAX_PATH_BYTES} bytes")
    if path.startswith("/"):
        raise InvalidInput(field, f"{path!r} must be relative to the project (no leading /)")
    parts = path.split("/")
    if len(parts) > MAX_PATH_PARTS:
        raise InvalidInput(field, f"must have at most {MAX_PATH_PARTS} parts")
    for part in parts:
        if part in ("", ".", ".."):
            raise InvalidInput(field, f"{path!r} has an empty, '.' or '..' part")
        if _BAD_PART_CHARS.search(part) or part != part.strip():
            raise InvalidInput(field, f"{path!r} has a control character, a backslash or "
                                      "spaces around a part")
        if part.startswith("-"):
            raise InvalidInput(field, f"{path!r} has a part starting with '-'")
    return path


def check_prefix(prefix: object, field: str = "prefix") -> str:
    """A folder to list (``jd`` or ``jd/``); empty means the whole project."""
    if prefix in (None, ""):
        return ""
    assert isinstance(prefix, str) or prefix is not None
    text = str(prefix).rstrip("/")
    return check_path(text, field) + "/"


def check_content(content: object, path: str = "") -> bytes:
    """The bytes of a script, refused with a clear reason when too large or not text."""
    if isinstance(content, str):
        content = content.encode("utf-8")
    if not isinstance(content, bytes):
        raise InvalidInput("content", "must be text")
    where = f" ({path})" if path else ""
    if len(content) > MAX_SCRIPT_BYTES:
        raise InvalidInput("content", f"is {len(content):,} bytes{where}; a script may be at "
                                      f"most {MAX_SCRIPT_BYTES:,} bytes")
    if b"\x00" in content:
        raise InvalidInput("content", f"looks binary{where}: it holds NUL bytes; a script "
                                      "must be UTF-8 text")
    try:
        content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("content", f"is not UTF-8 text{where} (byte {exc.start}); a script "
                                      "must be UTF-8 text") from None
    return content


def digest_of(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def check_digest(digest: object, field: str = "digest") -> str:
    if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
        raise InvalidInput(field, "must be 64 lowercase hexadecimal digits (a SHA-256)")
    return digest


def verified(content: bytes, digest: str, what: str) -> bytes:
    """``content`` if its SHA-256 is ``digest`` (RecordCorrupt otherwise: stored bytes that
    changed are never run)."""
    actual = digest_of(content)
    if actual != digest:
        raise RecordCorrupt(f"{what}: the stored content has SHA-256 {actual[:12]}…, not "
                            f"{digest[:12]}…")
    return content


def interpreter_for(path: str, given: str | None = None,
                    field: str = "interpreter") -> Interpreter:
    """The interpreter named, or the one the extension implies."""
    if given is not None:
        try:
            return Interpreter(given)
        except ValueError:
            raise InvalidInput(field, f"unknown interpreter {given!r}; use "
                                      f"{known_interpreters()}") from None
    dot = path.rfind(".")
    found = BY_EXTENSION.get(path[dot:].lower()) if dot > path.rfind("/") else None
    if found is None:
        raise InvalidInput(field, f"cannot tell how to run {path!r} from its extension "
                                  f"(.py, .js, .mjs, .cjs, .sh): name one of "
                                  f"{known_interpreters()}")
    return found


def check_source(source: str) -> str:
    if not source or len(source) > MAX_SOURCE:
        raise InvalidInput("source", f"must be 1 to {MAX_SOURCE} characters")
    return source


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptRevision:
    """One save (or removal, ``digest`` None) of a script."""

    project_id: str
    path: str
    revision: int
    digest: str | None
    size_bytes: int | None
    source: str  # "put", "rm", "repo:<name>"
    created_by: str
    created_at_ms: int

    @property
    def removed(self) -> bool:
        return self.digest is None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptFile:
    """A script's revision and its bytes (verified against the digest when read)."""

    revision: ScriptRevision
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptRef:
    """A task's command given as a script of its project, before its digest is pinned: the
    publish resolves it to the head revision's content (``ScriptCommand``)."""

    path: str
    interpreter: str | None = None  # None: by the extension
    args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_path(self.path, "script")
        interpreter_for(self.path, self.interpreter)
