"""Fixtures: a tiny Nitro-T-shaped checkpoint with stand-in remote code, and a tiny Llama."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from nitro_tiny import build_tiny_llama, build_tiny_nitro  # noqa: E402


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    return build_tiny_llama(tmp_path_factory.mktemp("ckpt") / "tiny-llama")


@pytest.fixture(scope="session")
def tiny_nitro(tmp_path_factory) -> Path:
    return build_tiny_nitro(tmp_path_factory.mktemp("ckpt") / "tiny-nitro")
