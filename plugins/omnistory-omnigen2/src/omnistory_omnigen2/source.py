"""OmniGen2's code: a checkout of VectorSpaceLab/OmniGen2 (not on PyPI, not in diffusers 0.42).

The official ViStoryBench server (``IC/omnigen2/api_server.py``) imports
``OmniGen2Pipeline`` and ``OmniGen2Transformer2DModel`` from the repository; so does this plugin,
from the directory the user passes as ``image.source_dir``.  Checking, digesting and importing
are :mod:`omnistory_core.kit.checkout`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.kit.checkout import Checkout

REPOSITORY = "https://github.com/VectorSpaceLab/OmniGen2"
#: the newest commit when this plugin was written (ViStoryBench names none)
PINNED_COMMIT = "0f72fa92564d9f8ba76f53fcc3c05aca2372458f"
PIPELINE_MODULE = "omnigen2.pipelines.omnigen2.pipeline_omnigen2"
TRANSFORMER_MODULE = "omnigen2.models.transformers.transformer_omnigen2"


#: both experts read the same checkout (and the same environment variable,
#: ``OMNISTORY_SOURCE_IMAGE_OMNIGEN2``)
CHECKOUT = Checkout(
    component="image=omnigen2",
    name="OmniGen2",
    repository=REPOSITORY,
    commit=PINNED_COMMIT,
    required_files=(
        PIPELINE_MODULE.replace(".", "/") + ".py",
        TRANSFORMER_MODULE.replace(".", "/") + ".py",
    ),
    packages=("omnigen2",),
    digest_dirs=("omnigen2",),
)


@dataclass(frozen=True)
class Upstream:
    """The upstream names the expert uses."""

    OmniGen2Pipeline: Any
    OmniGen2Transformer2DModel: Any


def import_upstream(root: Path) -> Upstream:
    pipeline, transformer = CHECKOUT.import_modules(root, PIPELINE_MODULE, TRANSFORMER_MODULE)
    return Upstream(pipeline.OmniGen2Pipeline, transformer.OmniGen2Transformer2DModel)


__all__ = ["CHECKOUT", "PINNED_COMMIT", "REPOSITORY", "Upstream", "import_upstream"]
