"""Story-Adapter's code: a checkout of UCSC-VLAA/story-adapter (``image.source_dir``).

The plugin imports ``StoryAdapterXL`` from the checkout's ``ip_adapter`` package and builds it as
the public ``run.py`` does, ``StoryAdapterXL(pipe, image_encoder_path, ip_ckpt, device)``.
(ViStoryBench's run passed a fifth argument, a long-prompt encoder, to a modified
``ip_adapter`` that is not published.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnistory_core.kit.checkout import Checkout

REPOSITORY = "https://github.com/UCSC-VLAA/story-adapter"
#: the commit ViStoryBench's facts were read at
PINNED_COMMIT = "6f1c402abd77807b27f2ff4f360cb4f56edf0ef3"

CHECKOUT = Checkout(
    component="image=storyadapter",
    name="story-adapter",
    repository=REPOSITORY,
    commit=PINNED_COMMIT,
    required_files=("ip_adapter/__init__.py", "ip_adapter/ip_adapter.py"),
    packages=("ip_adapter",),
    digest_dirs=("ip_adapter",),
)


def import_story_adapter(root: Path) -> Any:
    """``StoryAdapterXL`` from the checkout at ``root``."""
    (package,) = CHECKOUT.import_modules(root, "ip_adapter")
    return package.StoryAdapterXL


__all__ = ["CHECKOUT", "PINNED_COMMIT", "REPOSITORY", "import_story_adapter"]
