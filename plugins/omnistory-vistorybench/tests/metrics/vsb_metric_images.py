"""Helpers of the ViStoryBench metric tests: images written to disk as Media, tiny checkpoints."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from omnistory_core.api import Media

#: set (scripts/test.sh does, in the environment that has a torchvision matching its torch):
#: the checks against torchvision fail instead of skipping when it cannot be imported
REQUIRE_TORCHVISION = "OMNISTORY_REQUIRE_TORCHVISION"


def require_torchvision() -> None:
    """Skip (or, with ``$OMNISTORY_REQUIRE_TORCHVISION`` set, fail) unless torchvision imports
    here: absent, or its CUDA wheel beside a CPU-only torch (its C++ ops then fail to load)."""
    import os

    import pytest

    try:
        import torchvision.transforms  # noqa: F401  # pyright: ignore[reportMissingImports]
    except Exception as exc:
        why = f"torchvision cannot be imported here: {type(exc).__name__}: {exc}"
        if os.environ.get(REQUIRE_TORCHVISION):
            pytest.fail(f"{why} (${REQUIRE_TORCHVISION} is set)")
        pytest.skip(why)


def media_of(path: Path) -> Media:
    return Media(str(path), hashlib.sha256(path.read_bytes()).hexdigest())


def write_image(path: Path, array: Any, **save: Any) -> Media:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.asarray(array, dtype=np.uint8)).save(path, **save)
    return media_of(path)


def noise(height: int = 48, width: int = 64, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3)).astype(np.uint8)


def halves(left: tuple[int, int, int], right: tuple[int, int, int], height: int, width: int):
    """An image whose left half is one colour and right half another."""
    array = np.zeros((height, width, 3), dtype=np.uint8)
    array[:, : width // 2] = left
    array[:, width // 2 :] = right
    return array


# -- tiny random checkpoints, saved the way the real ones are ----------------------------------
def build_tiny_clip(directory: Path, seed: int = 0, image_size: int = 32) -> Path:
    """A CLIPModel (vision: hidden 32, 2 layers) and its CLIPImageProcessor, save_pretrained."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    torch.manual_seed(seed)
    config = CLIPConfig(
        text_config=dict(
            vocab_size=64,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=16,
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            image_size=image_size,
            patch_size=8,
        ),
        projection_dim=16,
    )
    CLIPModel(config).save_pretrained(directory)
    CLIPImageProcessor(
        size={"shortest_edge": image_size},
        crop_size={"height": image_size, "width": image_size},
    ).save_pretrained(directory)
    return directory


def build_tiny_siglip(directory: Path, seed: int = 0) -> Path:
    """A SiglipModel (vision: hidden 32, 2 layers, 378 px / patch 14 as so400m's 27x27 grid) and
    a SiglipImageProcessor, save_pretrained like the hub's google/siglip-so400m-patch14-384."""
    import torch
    from transformers import SiglipConfig, SiglipImageProcessor, SiglipModel

    torch.manual_seed(seed)
    config = SiglipConfig(
        text_config=dict(
            vocab_size=64,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=16,
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            image_size=378,
            patch_size=14,
        ),
    )
    SiglipModel(config).save_pretrained(directory)
    SiglipImageProcessor(size={"height": 384, "width": 384}).save_pretrained(directory)
    return directory
