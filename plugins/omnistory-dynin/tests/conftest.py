"""Fixtures: the stand-in Dynin-Omni checkout and tiny checkpoints built with save_pretrained."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from dynin_standin import (  # noqa: E402
    build_image_codec,
    build_model,
    build_speech_codec,
    write_source_tree,
)


@pytest.fixture(scope="session")
def source_tree(tmp_path_factory) -> Path:
    return write_source_tree(tmp_path_factory.mktemp("src") / "Dynin-Omni")


@pytest.fixture(scope="session")
def checkpoints(source_tree, tmp_path_factory) -> dict:
    """Model (scripted to 40 speech codes), MAGVIT-v2, speech decoder, and the token layout."""
    root = tmp_path_factory.mktemp("ckpt")
    layout = build_model(source_tree, root / "dynin-standin")
    return {
        "model": root / "dynin-standin",
        "image_codec": build_image_codec(source_tree, root / "magvitv2-standin"),
        "speech_codec": build_speech_codec(root / "emova-speech-standin"),
        "layout": layout,
    }


@pytest.fixture(scope="session")
def short_speech_model(source_tree, tmp_path_factory) -> Path:
    """The same stand-in scripted to end its speech after 3 codes (fewer than the 8 needed)."""
    directory = tmp_path_factory.mktemp("ckpt-short") / "dynin-short-speech"
    build_model(source_tree, directory, speech_codes=3)
    return directory
