"""Fixtures: the stand-in CharaConsist checkout and a tiny FLUX.1-dev checkpoint."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from characonsist_standin import build_checkpoint, build_source_tree  # noqa: E402


@pytest.fixture(scope="session")
def characonsist_source(tmp_path_factory) -> Path:
    return build_source_tree(tmp_path_factory.mktemp("src") / "CharaConsist")


@pytest.fixture(scope="session")
def tiny_flux_dev(tmp_path_factory) -> Path:
    return build_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny-flux-dev")
