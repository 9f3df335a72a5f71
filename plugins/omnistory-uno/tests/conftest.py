"""Fixtures: the stand-in UNO checkout and its weight files, built once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from uno_standin import build_source_tree, build_weights  # noqa: E402


@pytest.fixture(scope="session")
def uno_source(tmp_path_factory) -> Path:
    return build_source_tree(tmp_path_factory.mktemp("src") / "UNO")


@pytest.fixture(scope="session")
def uno_weights(tmp_path_factory) -> dict[str, Path]:
    return build_weights(tmp_path_factory.mktemp("weights"))
