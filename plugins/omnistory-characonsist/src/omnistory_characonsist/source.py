"""CharaConsist's code: a checkout of Murray-Wang/CharaConsist (``image.source_dir``).

The official ViStoryBench script imports ``CharaConsistPipeline`` (a subclass of diffusers'
``FluxPipeline``) from ``models/pipeline_characonsist.py`` and four helpers from
``models/attention_processor_characonsist.py``; so does this plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.kit.checkout import Checkout

REPOSITORY = "https://github.com/Murray-Wang/CharaConsist"
#: the commit ViStoryBench's facts were read at
PINNED_COMMIT = "759018c8b367ec2a08bfc4e96387c697a80a042d"
PIPELINE_MODULE = "models.pipeline_characonsist"
ATTENTION_MODULE = "models.attention_processor_characonsist"

CHECKOUT = Checkout(
    component="image=characonsist",
    name="CharaConsist",
    repository=REPOSITORY,
    commit=PINNED_COMMIT,
    required_files=(
        "models/pipeline_characonsist.py",
        "models/attention_processor_characonsist.py",
    ),
    # upstream's package is named "models": drop another checkout's same-named modules
    packages=("models",),
    digest_dirs=("models",),
)


@dataclass(frozen=True)
class Upstream:
    CharaConsistPipeline: Any
    reset_attn_processor: Any
    set_text_len: Any
    reset_size: Any
    reset_id_bank: Any


def import_upstream(root: Path) -> Upstream:
    pipeline, attention = CHECKOUT.import_modules(root, PIPELINE_MODULE, ATTENTION_MODULE)
    return Upstream(
        pipeline.CharaConsistPipeline,
        attention.reset_attn_processor,
        attention.set_text_len,
        attention.reset_size,
        attention.reset_id_bank,
    )


__all__ = ["CHECKOUT", "PINNED_COMMIT", "REPOSITORY", "Upstream", "import_upstream"]
