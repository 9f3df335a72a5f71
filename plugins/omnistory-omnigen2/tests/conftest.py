"""Fixtures: the stand-in OmniGen2 checkout and its tiny checkpoint, built once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from omnigen2_standin import build_checkpoint, build_source_tree  # noqa: E402


@pytest.fixture(scope="session")
def omnigen2_source(tmp_path_factory) -> Path:
    return build_source_tree(tmp_path_factory.mktemp("src") / "OmniGen2")


@pytest.fixture(scope="session")
def omnigen2_model(tmp_path_factory, omnigen2_source) -> Path:
    return build_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny-omnigen2", omnigen2_source)
