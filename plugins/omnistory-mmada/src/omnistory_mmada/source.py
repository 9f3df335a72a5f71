"""MMaDA's model code: a checkout of the git repository Gen-Verse/MMaDA, imported from its root.

Nothing of MMaDA is vendored.  The user clones the repository at the commit the official
Omni-StoryBench runner pins and passes its directory as ``backbone.source_dir``; ``load()`` puts
that directory on ``sys.path`` and imports the modules the upstream inference scripts import.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPOSITORY = "https://github.com/Gen-Verse/MMaDA"
#: the commit the official Omni-StoryBench runner pins (third_party/manifest.json)
PINNED_COMMIT = "3cdb870"
#: the environment variable the shipped config reads ``source_dir`` from
SOURCE_ENV = "OMNISTORY_SOURCE_BACKBONE_MMADA"
#: files of the checkout this plugin imports; their contents are part of the cache key
REQUIRED_FILES: tuple[str, ...] = (
    "models/__init__.py",
    "training/prompting_utils.py",
    "training/utils.py",
)
#: top-level package names of the checkout (generic names: other git-only models use them too)
PACKAGES: tuple[str, ...] = ("models", "training")

GET_IT = (
    f"get it with `git clone {REPOSITORY} MMaDA && git -C MMaDA checkout {PINNED_COMMIT}` and pass "
    f"backbone.source_dir=$PWD/MMaDA (or export {SOURCE_ENV}=$PWD/MMaDA)"
)


class SourceError(ValueError):
    """``source_dir`` is missing or not a checkout of MMaDA (the message is one line)."""


def check_source_dir(value: Any) -> Path:
    """The checkout's directory, or a :class:`SourceError` naming the parameter and the commands."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise SourceError(
            "backbone=mmada: backbone.source_dir is not set; MMaDA's model code is a git "
            f"repository, {GET_IT}"
        )
    if not isinstance(value, str | os.PathLike):
        raise SourceError(f"backbone=mmada: backbone.source_dir must be a path, got {value!r}")
    path = Path(value).expanduser()
    if not path.is_dir():
        raise SourceError(
            f"backbone=mmada: backbone.source_dir={str(value)!r} is not a directory; {GET_IT}"
        )
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise SourceError(
            f"backbone=mmada: backbone.source_dir={str(value)!r} is not a checkout of "
            f"Gen-Verse/MMaDA (no {', '.join(missing)}); {GET_IT}"
        )
    return path.resolve()


def tree_digest(root: Path) -> str:
    """SHA-256 over the Python files of ``models/`` and the imported ``training`` modules: the
    identity of the model code in the cache key (a path would differ between machines)."""
    files = sorted(p for p in (root / "models").rglob("*.py") if "__pycache__" not in p.parts)
    files += [root / name for name in REQUIRED_FILES[1:]]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def git_revision(root: Path) -> str | None:
    """The commit checked out in ``root`` (read from ``.git`` without running git), or None."""
    git = root / ".git"
    if git.is_file():  # a worktree or submodule: "gitdir: <path>"
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
    try:
        return (git / ref).read_text(encoding="utf-8").strip() or None
    except OSError:
        pass
    try:
        for line in (git / "packed-refs").read_text(encoding="utf-8").splitlines():
            sha, _, name = line.partition(" ")
            if name.strip() == ref:
                return sha.strip()
    except OSError:
        pass
    return None


@dataclass(frozen=True)
class Upstream:
    """The upstream names the backbone uses."""

    MMadaModelLM: Any
    MAGVITv2: Any
    get_mask_schedule: Any
    UniversalPrompting: Any
    image_transform: Any


def _inside(module: Any, root: Path) -> bool:
    file = getattr(module, "__file__", None)
    if not file:
        return False
    try:
        Path(file).resolve().relative_to(root)
    except ValueError:
        return False
    return True


def import_upstream(root: Path) -> Upstream:
    """Import MMaDA's modules from the checkout at ``root``.

    ``models`` and ``training`` are generic package names: modules of that name imported from
    somewhere else (another checkout, another git-only model) are dropped from ``sys.modules``
    first, so the names always resolve to this checkout.
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
    prompting = importlib.import_module("training.prompting_utils")
    utils = importlib.import_module("training.utils")
    return Upstream(
        MMadaModelLM=models.MMadaModelLM,
        MAGVITv2=models.MAGVITv2,
        get_mask_schedule=models.get_mask_schedule,
        UniversalPrompting=prompting.UniversalPrompting,
        image_transform=utils.image_transform,
    )
