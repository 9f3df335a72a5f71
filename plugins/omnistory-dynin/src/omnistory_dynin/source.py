"""Dynin-Omni's model code: a checkout of the git repository AIDASLab/Dynin-Omni.

Nothing of it is vendored.  The user clones the repository at the commit the benchmark's runner was
checked with and passes the directory as ``backbone.source_dir``; ``load()`` puts it first on
``sys.path`` and imports ``from models import DyninOmniModelLM, MAGVITv2`` as the runner does.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from pathlib import Path
from typing import Any

REPOSITORY = "https://github.com/AIDASLab/Dynin-Omni"
#: the commit the benchmark's Dynin-Omni runner was checked with
PINNED_COMMIT = "d6e3ca874f399a976c42bd3c8a58eb469eb7e3a3"
#: the environment variable the shipped config reads ``source_dir`` from
SOURCE_ENV = "OMNISTORY_SOURCE_BACKBONE_DYNIN"
#: files of the checkout the import needs
REQUIRED_FILES: tuple[str, ...] = (
    "models/__init__.py",
    "models/modeling_dynin_omni.py",
    "models/modeling_magvitv2.py",
)
#: top-level package names of the checkout (generic names other git-only models use too)
PACKAGES: tuple[str, ...] = ("models", "training")

GET_IT = (
    f"get it with `git clone {REPOSITORY}.git Dynin-Omni && git -C Dynin-Omni checkout "
    f"{PINNED_COMMIT[:7]}` and pass backbone.source_dir=$PWD/Dynin-Omni (or export "
    f"{SOURCE_ENV}=$PWD/Dynin-Omni)"
)


class SourceError(ValueError):
    """``source_dir`` is missing or not a Dynin-Omni checkout (one-line message)."""


def check_source_dir(value: Any) -> Path:
    """The checkout's directory, or a :class:`SourceError` saying how to get one."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise SourceError(
            "backbone=dynin: backbone.source_dir is not set; Dynin-Omni's model code is a git "
            f"repository, {GET_IT}"
        )
    if not isinstance(value, str | os.PathLike):
        raise SourceError(f"backbone=dynin: backbone.source_dir must be a path, got {value!r}")
    path = Path(value).expanduser()
    if not path.is_dir():
        raise SourceError(
            f"backbone=dynin: backbone.source_dir={str(value)!r} is not a directory; {GET_IT}"
        )
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise SourceError(
            f"backbone=dynin: backbone.source_dir={str(value)!r} is not a checkout of "
            f"AIDASLab/Dynin-Omni (no {', '.join(missing)}); {GET_IT}"
        )
    return path.resolve()


def tree_digest(root: Path) -> str:
    """SHA-256 over the checkout's ``models/*.py``: the model code's identity in the cache key
    (its path differs between machines, its content does not)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in (root / "models").rglob("*.py") if "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def git_revision(root: Path) -> str | None:
    """The commit checked out in ``root``, read from ``.git`` without running git (or None)."""
    git = root / ".git"
    if git.is_file():  # worktree or submodule: "gitdir: <path>"
        text = git.read_text(encoding="utf-8").strip()
        if not text.startswith("gitdir:"):
            return None
        git = (root / text.split(":", 1)[1].strip()).resolve()
    try:
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not head.startswith("ref:"):
        return head or None
    ref = head.split(":", 1)[1].strip()
    loose = git / ref
    if loose.is_file():
        return loose.read_text(encoding="utf-8").strip() or None
    try:
        packed = (git / "packed-refs").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name.strip() == ref:
            return sha.strip()
    return None


def _inside(module: Any, root: Path) -> bool:
    file = getattr(module, "__file__", None)
    if not file:
        return False
    try:
        Path(file).resolve().relative_to(root)
    except ValueError:
        return False
    return True


def import_models(root: Path) -> tuple[Any, Any]:
    """``(DyninOmniModelLM, MAGVITv2)`` imported from the checkout at ``root``.

    ``models`` is a generic package name: modules of that name imported from elsewhere (another
    git-only model's checkout) are dropped from ``sys.modules`` first.
    """
    root = root.resolve()
    for name in list(sys.modules):
        if name.split(".", 1)[0] in PACKAGES and not _inside(sys.modules[name], root):
            del sys.modules[name]
    entry = str(root)
    if entry in sys.path:
        sys.path.remove(entry)
    sys.path.insert(0, entry)
    importlib.invalidate_caches()
    models = importlib.import_module("models")
    return models.DyninOmniModelLM, models.MAGVITv2
