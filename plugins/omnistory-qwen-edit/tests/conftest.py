"""Fixtures: the tiny Qwen-Image-Edit checkpoint and a LoRA for it, built once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from qwen_tiny import build_tiny_lora, build_tiny_qwen_edit  # noqa: E402


@pytest.fixture(scope="session")
def tiny_qwen_edit(tmp_path_factory) -> Path:
    return build_tiny_qwen_edit(tmp_path_factory.mktemp("ckpt") / "tiny-qwen-edit")


@pytest.fixture(scope="session")
def tiny_lora(tmp_path_factory, tiny_qwen_edit) -> Path:
    return build_tiny_lora(tmp_path_factory.mktemp("lora") / "tiny-lora", tiny_qwen_edit)
