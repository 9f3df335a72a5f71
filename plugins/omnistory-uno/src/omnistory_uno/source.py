"""UNO's code: a checkout of bytedance/UNO (its own FLUX implementation, not diffusers).

The official ViStoryBench script (``IC/uno/inference_custom.py``) imports ``UNOPipeline`` and
``preprocess_ref`` from ``uno.flux.pipeline``; so does this plugin, from ``image.source_dir``.
UNO reads its weights' locations from environment variables, some of them when
``uno.flux.util`` is imported (``FLUX_DEV``, ``AE``), the others while loading (``LORA``, ``T5``,
``CLIP``): :func:`weights_environment` sets them around the import and the construction, and the
UNO modules are imported afresh each time.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.kit.checkout import Checkout

REPOSITORY = "https://github.com/bytedance/UNO"
#: the commit ViStoryBench's facts were read at
PINNED_COMMIT = "d305981b9e301315b5c110aef9c7eed827457858"
PIPELINE_MODULE = "uno.flux.pipeline"

#: both experts read the same checkout (environment variable ``OMNISTORY_SOURCE_IMAGE_UNO``)
CHECKOUT = Checkout(
    component="image=uno",
    name="UNO",
    repository=REPOSITORY,
    commit=PINNED_COMMIT,
    required_files=("uno/flux/pipeline.py", "uno/flux/util.py"),
    packages=("uno",),
    digest_dirs=("uno",),
)
#: expert parameter -> the environment variable UNO reads it from
WEIGHT_VARIABLES: dict[str, str] = {
    "flux_dev": "FLUX_DEV",
    "ae": "AE",
    "lora": "LORA",
    "t5": "T5",
    "clip": "CLIP",
}


@dataclass(frozen=True)
class Upstream:
    UNOPipeline: Any
    preprocess_ref: Any


@contextmanager
def weights_environment(values: Mapping[str, str | None]) -> Iterator[None]:
    """``os.environ`` with UNO's variables set from ``values`` (by parameter name; None unsets),
    restored afterwards."""
    saved = {var: os.environ.get(var) for var in WEIGHT_VARIABLES.values()}
    try:
        for param, var in WEIGHT_VARIABLES.items():
            value = values.get(param)
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = str(value)
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def import_upstream(root: Path) -> Upstream:
    """Import ``uno.flux.pipeline`` from ``root`` afresh (its configs read the environment at
    import)."""
    for name in [m for m in sys.modules if m.split(".")[0] == "uno"]:
        del sys.modules[name]
    (pipeline,) = CHECKOUT.import_modules(root, PIPELINE_MODULE)
    return Upstream(pipeline.UNOPipeline, pipeline.preprocess_ref)


__all__ = [
    "CHECKOUT",
    "PINNED_COMMIT",
    "REPOSITORY",
    "WEIGHT_VARIABLES",
    "Upstream",
    "import_upstream",
    "weights_environment",
]
