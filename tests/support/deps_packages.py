"""Tiny local packages for the dependency tests, built without a network: a Python wheel
written by hand (a wheel is a zip with its metadata and RECORD) and an npm tarball (a
tar.gz whose files sit under ``package/``)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def wheel(folder: Path, name: str = "qltiny", version: str = "1.0",
          value: str = "tiny") -> Path:
    """A pure-Python wheel of module ``name`` whose ``VALUE`` is ``value``, in ``folder``
    (a --find-links directory)."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VALUE = {value!r}\n".encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: qinglong-tests\n"
                         b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    target = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return target


def npm_tarball(folder: Path, name: str = "qltinyjs", version: str = "1.0.0",
                value: str = "tiny js") -> Path:
    """An npm package tarball whose main module exports ``value``."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {"package/package.json": json.dumps({"name": name, "version": version,
                                                 "main": "index.js"}).encode(),
             "package/index.js": f"module.exports = {json.dumps(value)};\n".encode()}
    target = folder / f"{name}-{version}.tgz"
    with tarfile.open(target, "w:gz") as archive:
        for path, data in files.items():
            entry = tarfile.TarInfo(path)
            entry.size = len(data)
            entry.mode = 0o644
            archive.addfile(entry, io.BytesIO(data))
    return target
