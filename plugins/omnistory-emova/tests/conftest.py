"""Fixtures: tiny EMOVA-shaped checkpoints with stand-in remote code (see emova_tiny.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from emova_tiny import (  # noqa: E402
    MISSING_T2I_REPLY,
    build_tiny_emova,
    build_tiny_speech_tokenizer,
)


@pytest.fixture(scope="session")
def ckpt_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("emova-ckpt")


@pytest.fixture(scope="session")
def tiny_emova(ckpt_dir) -> Path:
    """Answers the image prompt with good JSON and the speech prompt with 8 speech units."""
    return build_tiny_emova(ckpt_dir / "emova")


@pytest.fixture(scope="session")
def tiny_speech_tokenizer(ckpt_dir) -> Path:
    return build_tiny_speech_tokenizer(ckpt_dir / "speech-tokenizer")


@pytest.fixture(scope="session")
def mute_emova(ckpt_dir) -> Path:
    """Good JSON, but the speech pass ends at once (EOS, no speech units)."""
    return build_tiny_emova(ckpt_dir / "emova-mute", text_reply="")


@pytest.fixture(scope="session")
def chatty_emova(ckpt_dir) -> Path:
    """Good JSON, and the speech pass would rather say plain words than speech units."""
    return build_tiny_emova(ckpt_dir / "emova-chatty", text_reply="hello world hello world")


@pytest.fixture(scope="session")
def no_t2i_emova(ckpt_dir) -> Path:
    """Pass 1 returns JSON without "t2i"."""
    return build_tiny_emova(ckpt_dir / "emova-no-t2i", image_reply=MISSING_T2I_REPLY)
