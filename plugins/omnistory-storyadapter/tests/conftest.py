"""Fixtures: the stand-in story-adapter checkout, tiny IP-Adapter weights and a tiny SDXL (the
StoryDiffusion plugin's test builder)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2] / "omnistory-storydiffusion" / "tests"))

from sdxl_tiny import build_tiny_sdxl  # noqa: E402
from storyadapter_standin import build_ip_adapter, build_source_tree  # noqa: E402


@pytest.fixture(scope="session")
def storyadapter_source(tmp_path_factory) -> Path:
    return build_source_tree(tmp_path_factory.mktemp("src") / "story-adapter")


@pytest.fixture(scope="session")
def ip_adapter(tmp_path_factory) -> dict[str, Path]:
    return build_ip_adapter(tmp_path_factory.mktemp("ip"))


@pytest.fixture(scope="session")
def sdxl_for_adapter(tmp_path_factory) -> Path:
    return build_tiny_sdxl(tmp_path_factory.mktemp("ckpt") / "tiny-sdxl")
