"""Writing files so that a reader sees either nothing or a complete file, and where the
project's caches on disk lie.

A leaf: it imports nothing from ``omnistory_core``, so the store
(:mod:`omnistory_core.engine.store`) and the job-directory format (:mod:`omnistory_core.jobdir`)
both write through it without importing each other.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes", "link_or_copy", "user_cache_dir"]


def user_cache_dir(name: str, override_env: str) -> Path:
    """Where a cache of omnistory's lies: ``$override_env`` when set, else
    ``$XDG_CACHE_HOME/omnistory/<name>`` (``~/.cache`` without ``XDG_CACHE_HOME``)."""
    explicit = os.environ.get(override_env)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "omnistory" / name


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def link_or_copy(src: Path, dst: Path) -> None:
    """``dst`` becomes ``src``'s content, by hard link where the filesystem allows (``src`` must
    never be written again: store blobs are immutable)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp")
    if tmp.exists():
        tmp.unlink()
    try:
        os.link(src, tmp)  # a hard link costs no space
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)
