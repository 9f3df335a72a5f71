"""Fixtures: tiny native Emu3 checkpoints (random Chat, random Gen, and a Chat fitted to answer
valid JSON), built once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from emu3_tiny import TINY_IMAGE_AREA, build_tiny_emu3, demo_items, train_to_answer  # noqa: E402


@pytest.fixture(scope="session")
def tiny_chat(tmp_path_factory) -> Path:
    return build_tiny_emu3(tmp_path_factory.mktemp("ckpt") / "chat", seed=0)


@pytest.fixture(scope="session")
def tiny_gen(tmp_path_factory) -> Path:
    return build_tiny_emu3(
        tmp_path_factory.mktemp("ckpt") / "gen", seed=1, image_area=TINY_IMAGE_AREA
    )


@pytest.fixture(scope="session")
def trained_chat(tiny_chat, tmp_path_factory) -> Path:
    return train_to_answer(tiny_chat, tmp_path_factory.mktemp("ckpt") / "chat-fitted", demo_items())


@pytest.fixture(scope="session")
def items() -> list[dict]:
    return demo_items()
