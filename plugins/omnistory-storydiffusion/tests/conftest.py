"""Fixtures: the tiny SDXL checkpoint, built once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from sdxl_tiny import build_tiny_sdxl  # noqa: E402


@pytest.fixture(scope="session")
def tiny_sdxl(tmp_path_factory) -> Path:
    return build_tiny_sdxl(tmp_path_factory.mktemp("ckpt") / "tiny-sdxl")
