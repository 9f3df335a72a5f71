"""Fixtures: tiny FLUX.1 checkpoints (built once per session) and page images as engine Media."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from flux_tiny import build_tiny_flux  # noqa: E402


@pytest.fixture(scope="session")
def tiny_dev(tmp_path_factory) -> Path:
    return build_tiny_flux(tmp_path_factory.mktemp("ckpt") / "tiny-flux-dev", "dev")


@pytest.fixture(scope="session")
def tiny_kontext(tmp_path_factory) -> Path:
    return build_tiny_flux(tmp_path_factory.mktemp("ckpt") / "tiny-flux-kontext", "kontext")


@pytest.fixture
def page(tmp_path):
    """``page(name, size, colour)`` -> a PNG page image wrapped as the engine's Media."""
    from PIL import Image

    from omnistory_core.api import Media

    def make(name: str, size: tuple[int, int] = (64, 64), seed: int = 0) -> Media:
        import numpy as np

        rng = np.random.default_rng(seed)
        pixels = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
        path = tmp_path / f"{name}.png"
        Image.fromarray(pixels).save(path)
        return Media(path=str(path), sha256=hashlib.sha256(path.read_bytes()).hexdigest())

    return make
