"""Content fingerprints of the weights a component loads, so that they are part of its call keys.

A checkpoint replaced at the same path (a fine-tune, a corrupt download, a tiny stand-in) must
not be answered from the store with results of the old one.  A component declares the weights it
loads (``Param(..., weights=True)`` on a parameter naming a file or directory, or
:meth:`~omnistory_core.components.Component.weights_files` for a path it finds itself) and the
engine adds their fingerprints to the call key (``output_params()["__weights__"]``) whenever the
path names a local file or directory.  A hub id, an unset parameter or a path that does not exist
(yet) adds nothing, so keys without local weights are unchanged.

Hashing a multi-gigabyte checkpoint on every run would be slow, so a file is hashed once and
remembered by (absolute path, size, modification time): in this process and in a small cache on
disk (``$OMNISTORY_FINGERPRINT_CACHE``, else ``$XDG_CACHE_HOME/omnistory/fingerprints``, else
``~/.cache/omnistory/fingerprints``; a cache that cannot be written is skipped).  A changed size or
mtime rehashes.  A directory's fingerprint hashes the sorted list of its files (relative path,
size, content digest); dot-entries (``.git``, ``.cache``) are left out.

Pure standard library: no heavy import.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path

from omnistory_core.files import user_cache_dir

#: where the on-disk cache lies (overrides the default below)
CACHE_ENV = "OMNISTORY_FINGERPRINT_CACHE"
_BLOCK = 1 << 22
_memory: dict[tuple[str, int, int], str] = {}
_lock = threading.Lock()


def cache_dir() -> Path:
    """The on-disk cache folder (see the module docstring)."""
    return user_cache_dir("fingerprints", CACHE_ENV)


def local_weights(value: object) -> Path | None:
    """``value`` as a local file or directory, or None (not a string, empty, a hub id or a path
    that does not exist)."""
    if not isinstance(value, str | os.PathLike) or not str(value).strip():
        return None
    path = Path(os.path.expanduser(str(value)))
    return path.resolve() if path.exists() else None


def weights_fingerprint(path: str | os.PathLike[str]) -> str:
    """``sha256:<hex>`` of a file's bytes, ``tree:<hex>`` of a directory's files (see the module
    docstring).  FileNotFoundError when ``path`` does not exist."""
    target = Path(os.path.expanduser(os.fspath(path))).resolve()
    if target.is_dir():
        return "tree:" + _tree_digest(target)
    return "sha256:" + file_digest(target)


def file_digest(path: Path) -> str:
    """The SHA-256 of one file, from the caches when its size and mtime are unchanged."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _lock:
        known = _memory.get(key)
    if known is not None:
        return known
    digest = _read_cached(key) or _hash(path)
    with _lock:
        _memory[key] = digest
    _write_cached(key, digest)
    return digest


def _hash(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            h.update(block)
    return h.hexdigest()


def _tree_digest(root: Path) -> str:
    lines = []
    for path in sorted(_files(root), key=lambda p: p.relative_to(root).as_posix()):
        rel = path.relative_to(root).as_posix()
        lines.append(f"{rel}\0{path.stat().st_size}\0{file_digest(path)}\n")
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def _files(root: Path) -> list[Path]:
    found = []
    for entry in os.scandir(root):
        if entry.name.startswith("."):
            continue
        path = Path(entry.path)
        if entry.is_dir():
            found.extend(_files(path))
        elif entry.is_file():
            found.append(path.resolve() if entry.is_symlink() else path)
    return found


def _entry(key: tuple[str, int, int]) -> Path:
    return cache_dir() / f"{hashlib.sha256(key[0].encode('utf-8')).hexdigest()}.json"


def _read_cached(key: tuple[str, int, int]) -> str | None:
    try:
        data = json.loads(_entry(key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if [data.get("path"), data.get("size"), data.get("mtime_ns")] != list(key):
        return None
    digest = data.get("sha256")
    return digest if isinstance(digest, str) and len(digest) == 64 else None


def _write_cached(key: tuple[str, int, int], digest: str) -> None:
    entry = _entry(key)
    record = {"path": key[0], "size": key[1], "mtime_ns": key[2], "sha256": digest}
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=entry.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(record, fh)
        os.replace(tmp, entry)
    except OSError:  # a read-only home: the in-process cache still holds it
        return


__all__ = ["CACHE_ENV", "cache_dir", "file_digest", "local_weights", "weights_fingerprint"]
