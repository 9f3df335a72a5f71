"""Dynin-Omni's model code: a checkout of the git repository AIDASLab/Dynin-Omni.

Nothing of it is vendored.  The user clones the repository at the commit the benchmark's runner was
checked with and passes the directory as ``backbone.source_dir``; ``load()`` puts it first on
``sys.path`` and imports ``from models import DyninOmniModelLM, MAGVITv2`` as the runner does.
Checking, digesting and importing are :mod:`omnistory_core.kit.checkout`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnistory_core.api import CheckoutError as SourceError
from omnistory_core.kit.checkout import Checkout, git_revision

REPOSITORY = "https://github.com/AIDASLab/Dynin-Omni"
#: the commit the benchmark's Dynin-Omni runner was checked with
PINNED_COMMIT = "d6e3ca874f399a976c42bd3c8a58eb469eb7e3a3"
#: files of the checkout the import needs
REQUIRED_FILES: tuple[str, ...] = (
    "models/__init__.py",
    "models/modeling_dynin_omni.py",
    "models/modeling_magvitv2.py",
)
#: top-level package names of the checkout (generic names other git-only models use too)
PACKAGES: tuple[str, ...] = ("models", "training")

CHECKOUT = Checkout(
    component="backbone=dynin",
    name="Dynin-Omni",
    repository=f"{REPOSITORY}.git",
    commit=PINNED_COMMIT,
    required_files=REQUIRED_FILES,
    packages=PACKAGES,
    # the model code's identity in the cache key: the checkout's models/*.py
    digest_dirs=("models",),
)
#: the environment variable the shipped config reads ``source_dir`` from
SOURCE_ENV = CHECKOUT.env
GET_IT = CHECKOUT.get_it()

check_source_dir = CHECKOUT.check_dir
tree_digest = CHECKOUT.digest


def import_models(root: Path) -> tuple[Any, Any]:
    """``(DyninOmniModelLM, MAGVITv2)`` imported from the checkout at ``root`` (``models`` is a
    generic name: same-named modules imported from elsewhere are dropped first)."""
    (models,) = CHECKOUT.import_modules(root, "models")
    return models.DyninOmniModelLM, models.MAGVITv2


__all__ = [
    "CHECKOUT",
    "GET_IT",
    "PINNED_COMMIT",
    "REPOSITORY",
    "REQUIRED_FILES",
    "SOURCE_ENV",
    "SourceError",
    "check_source_dir",
    "git_revision",
    "import_models",
    "tree_digest",
]
