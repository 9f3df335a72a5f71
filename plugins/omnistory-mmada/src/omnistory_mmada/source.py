"""MMaDA's model code: a checkout of the git repository Gen-Verse/MMaDA, imported from its root.

Nothing of MMaDA is vendored.  The user clones the repository at the commit the official
Omni-StoryBench runner pins and passes its directory as ``backbone.source_dir``; ``load()`` puts
that directory on ``sys.path`` and imports the modules the upstream inference scripts import.
Checking, digesting and importing are :mod:`omnistory_core.kit.checkout`'s; this module declares
MMaDA's :class:`~omnistory_core.kit.checkout.Checkout` and the names the backbone uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.api import CheckoutError as SourceError
from omnistory_core.kit.checkout import Checkout, git_revision

REPOSITORY = "https://github.com/Gen-Verse/MMaDA"
#: the commit the official Omni-StoryBench runner pins (third_party/manifest.json)
PINNED_COMMIT = "3cdb870"
#: files of the checkout this plugin imports; their contents are part of the cache key
REQUIRED_FILES: tuple[str, ...] = (
    "models/__init__.py",
    "training/prompting_utils.py",
    "training/utils.py",
)
#: top-level package names of the checkout (generic names: other git-only models use them too)
PACKAGES: tuple[str, ...] = ("models", "training")

CHECKOUT = Checkout(
    component="backbone=mmada",
    name="MMaDA",
    repository=REPOSITORY,
    commit=PINNED_COMMIT,
    required_files=REQUIRED_FILES,
    packages=PACKAGES,
    # the identity of the model code in the cache key: models/ and the imported training modules
    digest_dirs=("models",),
    digest_files=REQUIRED_FILES[1:],
)
#: the environment variable the shipped config reads ``source_dir`` from
SOURCE_ENV = CHECKOUT.env
GET_IT = CHECKOUT.get_it()

check_source_dir = CHECKOUT.check_dir
tree_digest = CHECKOUT.digest


@dataclass(frozen=True)
class Upstream:
    """The upstream names the backbone uses."""

    MMadaModelLM: Any
    MAGVITv2: Any
    get_mask_schedule: Any
    UniversalPrompting: Any
    image_transform: Any


def import_upstream(root: Path) -> Upstream:
    """Import MMaDA's modules from the checkout at ``root`` (``models`` and ``training`` are
    generic names: same-named modules imported from elsewhere are dropped first)."""
    models, prompting, utils = CHECKOUT.import_modules(
        root, "models", "training.prompting_utils", "training.utils"
    )
    return Upstream(
        MMadaModelLM=models.MMadaModelLM,
        MAGVITv2=models.MAGVITv2,
        get_mask_schedule=models.get_mask_schedule,
        UniversalPrompting=prompting.UniversalPrompting,
        image_transform=utils.image_transform,
    )


__all__ = [
    "CHECKOUT",
    "GET_IT",
    "PACKAGES",
    "PINNED_COMMIT",
    "REPOSITORY",
    "REQUIRED_FILES",
    "SOURCE_ENV",
    "SourceError",
    "Upstream",
    "check_source_dir",
    "git_revision",
    "import_upstream",
    "tree_digest",
]
